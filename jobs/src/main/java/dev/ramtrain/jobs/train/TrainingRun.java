package dev.ramtrain.jobs.train;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.report.TrainingReport;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.BestEpoch;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.LoopSpec;
import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.Trainer;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.engines.Backends;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.data.CenterCrop;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.Normalization;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.run.HostLimit;
import dev.ramtrain.trainer.run.Placement;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * One training run over opened shards, wherever they come from (a dataset directory for {@code
 * train}, cached in-memory shards in the Spark task of {@code demo}): checks that the model fits
 * the data and, when resuming, that the checkpoint was written by the same run, then builds the
 * backend, loaders, model and optimizer the settings describe, trains with a checkpoint per epoch
 * into its {@link RunDirectory} and evaluates on the val split. The loop itself is {@link Trainer}.
 */
public final class TrainingRun {
  /** Samples the input normalization is measured on (the first, in shard order). */
  private static final int NORMALIZATION_SAMPLES = 10_000;

  private TrainingRun() {}

  /**
   * Trains as {@code spec} says on {@code data}, evaluating on its val split, writing metrics and
   * checkpoints into {@code run}. The checkpoints record the settings and data fingerprint that a
   * resume is checked against (unless the spec's output says to resume anyway).
   */
  public static EvalResult run(RunSpec spec, TrainingData data, RunDirectory run)
      throws IOException {
    return run(spec, data, run, RankContext.SINGLE);
  }

  /**
   * What one rank of a data-parallel job brings to a run besides its spec and data: the other
   * ranks, the checkpoint rank 0 resumes from (for the others, which have no run directory), who
   * hears of its steps (may be null), and the host memory it may take.
   */
  public record RankContext(
      DataParallel ranks, Checkpoints.Loaded resumeFrom, StepListener steps, HostLimit hostLimit) {
    /** A process training alone. */
    public static final RankContext SINGLE =
        new RankContext(DataParallel.single(), null, null, HostLimit.MACHINE);
  }

  /**
   * The same as one rank of a data-parallel job ({@code spec} already {@link RunSpec#forRank}):
   * rank 0 has the run directory and writes metrics and checkpoints; the others get {@code run}
   * null and, when resuming, {@code rank.resumeFrom()}. Returns the evaluation over all ranks.
   */
  public static EvalResult run(RunSpec spec, TrainingData data, RunDirectory run, RankContext rank)
      throws IOException {
    DataParallel ranks = rank.ranks();
    ShardSet train = data.train();
    ShardSet val = data.val();
    for (String split : List.of(Manifest.TRAIN, Manifest.VAL)) {
      Manifest.Split rows = data.manifest().splits().get(split);
      if (rows == null || rows.rows() == 0) {
        throw new ConfigException(
            String.format(
                "%s has no %s samples: training needs both splits; preprocess again with a"
                    + " val fraction that leaves some in each (ramtrain.etl.val-fraction)",
                data.source(), split));
      }
    }
    ImageShape shape = spec.data().train().inputShape(train.shape()); // the model's input
    List<String> classes = train.classes();
    spec = spec.forClasses(classes);
    spec.model().requireFits(shape, classes);
    SortedMap<String, String> settings = spec.resumeSettings();
    String fingerprint = RunFingerprint.data(data.manifest());
    Checkpoints.Loaded checkpoint = run != null ? run.checkpoint() : rank.resumeFrom();
    if (checkpoint != null) {
      RunFingerprint.requireSameRun(
          checkpoint, settings, fingerprint, spec.output().resumeAnyway());
    }
    try (Backend backend = Backends.open(spec.backend());
        DataLoader trainLoader =
            spec.data().loader(backend, train, spec.data().train(), spec.data().filter());
        DataLoader valLoader =
            spec.data().loader(backend, val, spec.data().eval(), spec.data().filter())) {
      if (trainLoader.batchesPerEpoch() == 0) {
        int accumulate = spec.loop().accumulate();
        throw new ConfigException(
            String.format(
                "ramtrain.train.batch-size = %d%s: the %,d train samples%s make no full %s"
                    + " (ramtrain.train.remainder = drop); use a smaller --batch-size%s",
                spec.batchSize(),
                accumulate > 1 ? " x ramtrain.train.accumulate = " + accumulate : "",
                trainLoader.samples(),
                ranks.worldSize() > 1 ? " this rank holds" : "",
                accumulate > 1 ? "step" : "batch",
                accumulate > 1 ? " or --accumulate" : ""));
      }
      ShardMemory.report(trainLoader, valLoader, spec.data().shardWindow(), rank.hostLimit());
      LoopSpec options = spec.loop();
      if (!options.normalizationGiven()) { // a resumed run keeps what its first epoch measured
        Normalization n =
            checkpoint != null
                ? Normalization.fromState(checkpoint.state())
                : measure(train, spec.data().train().rank(), ranks);
        options = options.withNormalization(n.mean(), n.std());
      }
      Stream setup = backend.createStream("setup");
      try (Learner learner =
              Placement.learner(
                  spec.model().blueprint(shape, spec.batchSize()),
                  spec.optimizer(),
                  spec.offload(),
                  options,
                  backend,
                  setup,
                  ranks,
                  rank.hostLimit());
          MetricsLog metrics = run != null ? run.metrics() : new MetricsLog(null);
          Trainer trainer =
              new Trainer(
                  backend,
                  learner,
                  spec.schedule()
                      .forRun(
                          options.stepsPerEpoch(trainLoader.batchesPerEpoch()), options.epochs()),
                  options,
                  shape,
                  metrics,
                  ranks)) {
        if (ranks.worldSize() > 1) {
          System.out.printf(
              "rank %d of %d: %,d train / %,d val samples of every epoch, batches of %d%n",
              ranks.rank(),
              ranks.worldSize(),
              trainLoader.batchesPerEpoch() * (long) spec.batchSize(),
              valLoader.samples(),
              spec.batchSize());
        }
        System.out.printf(
            "training %s (%,d parameters) on %s: %,d train / %,d val samples, %d classes, %d batches of %d per epoch; normalization mean %s std %s%n",
            spec.model().spec(),
            learner.parameterCount(),
            data.source(),
            trainLoader.samples(),
            valLoader.samples(),
            classes.size(),
            trainLoader.batchesPerEpoch(),
            spec.batchSize(),
            Arrays.toString(options.mean()),
            Arrays.toString(options.std()));
        Map<String, Object> info = new TreeMap<>(RunFingerprint.record(settings, fingerprint));
        info.put("classes", classes);
        info.put("image", List.of(shape.height(), shape.width(), shape.channels()));
        info.put("precision", RamtrainConfig.spelling(spec.model().precision()));
        if (spec.data().eval().augmentation().resize() instanceof CenterCrop crop) {
          ImageShape stored = train.shape(); // what serving resizes raw images to first
          info.put(
              "eval_crop",
              Map.of(
                  "height",
                  shape.height(),
                  "width",
                  shape.width(),
                  "crop_pct",
                  crop.cropPct(),
                  "stored",
                  List.of(stored.height(), stored.width(), stored.channels()),
                  "filter",
                  RamtrainConfig.spelling(spec.data().filter())));
        }
        info.put("mean", options.mean());
        info.put("std", options.std());
        info.put("dataset", data.source());
        info.put("resize", data.manifest().transforms().get("resize"));
        info.put("decoder", data.manifest().transforms().get("decoder"));
        info.put(
            "exif_orientation",
            data.manifest().transforms().getOrDefault("exif-orientation", "ignore"));
        info.put("config", recordedConfig(spec)); // every setting, for the report
        info.put("build", BuildInfo.record());
        info.put("train_samples", trainLoader.samples());
        info.put("val_samples", valLoader.samples());
        info.put("parameters", learner.parameterCount());
        if (run != null) {
          run.recordInCheckpoints(info);
        }
        trainer.checkpointTo(run, spec.output().checkpointEvery()); // every rank: the same cadence
        int firstEpoch = 0;
        if (checkpoint != null) {
          learner.restore(checkpoint, setup);
          trainer.resumeAt(checkpoint.globalStep());
          trainer.resumeBest(checkpoint.state());
          firstEpoch = checkpoint.epochsDone();
          System.out.printf(
              "resuming from %s after %d epochs, step %d%n",
              checkpoint.dir(), firstEpoch, checkpoint.globalStep());
        }
        if (spec.model().ema() > 0) { // from the checkpoint's average, or the weights now
          learner.averageWeights(spec.model().ema(), checkpoint, setup);
        }
        if (rank.steps() != null) {
          long start = checkpoint != null ? checkpoint.globalStep() : 0;
          int stepsPerEpoch = options.stepsPerEpoch(trainLoader.batchesPerEpoch());
          rank.steps().starting((long) options.epochs() * stepsPerEpoch - start);
          trainer.afterEachStep(rank.steps()::done);
        }
        trainer.fit(trainLoader, valLoader, firstEpoch);
        BestEpoch best = trainer.best();
        if (run != null && best.bestEpoch() > 0) {
          System.out.printf(
              "best epoch %d: %s %.4f (%s/checkpoints/best)%n",
              best.bestEpoch(), best.rule().metric().key(), best.best(), run.path());
        }
        EvalResult eval = trainer.evaluate(valLoader);
        if (ranks.worldSize() > 1) {
          String digest = digest(learner.snapshot(setup).weights());
          ranks.requireSame(digest.getBytes(StandardCharsets.US_ASCII), "final weights");
          System.out.printf(
              "rank %d of %d: final weights identical on every rank (%s)%n",
              ranks.rank(), ranks.worldSize(), digest);
        }
        return eval;
      }
    }
  }

  /**
   * The normalization every rank uses: where ranks hold shards of their own, measured by each on
   * its share of the samples and added up over the ranks, so that all normalize alike.
   */
  private static Normalization measure(ShardSet train, LoaderSpec.Rank rank, DataParallel ranks) {
    if (!rank.ownShards()) {
      return Normalization.measure(train, NORMALIZATION_SAMPLES, new LibjpegRows());
    }
    int share = Math.max(1, NORMALIZATION_SAMPLES / rank.worldSize());
    return Normalization.fromMoments(
        ranks.sum(Normalization.moments(train, share, new LibjpegRows())));
  }

  /**
   * The settings a checkpoint records for the report: all of them but where the run directory is
   * and whether this invocation replaced one, which say how it was started, not what it computed (a
   * run resumed in a moved directory writes the same state.json as the one left in place).
   */
  private static SortedMap<String, String> recordedConfig(RunSpec spec) {
    SortedMap<String, String> config = new TreeMap<>(spec.resolvedConfig());
    config.remove("ramtrain.train.output");
    config.remove("ramtrain.train.overwrite");
    return config;
  }

  /** SHA-256 over every tensor's name and values, in order. */
  static String digest(List<Safetensors.Tensor> weights) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      for (Safetensors.Tensor t : weights) {
        sha.update(t.name().getBytes(StandardCharsets.UTF_8));
        ByteBuffer values = ByteBuffer.allocate(4 * t.values().length);
        values.asFloatBuffer().put(t.values());
        sha.update(values);
      }
      return "sha256:" + HexFormat.of().formatHex(sha.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has SHA-256", e);
    }
  }

  /** Hears of a rank's steps: how many it is about to run, then each as it is done. */
  public interface StepListener {
    void starting(long stepsToRun);

    /** After step {@code stepsDone} (on the loop's thread; throwing fails the run). */
    void done(long stepsDone);
  }

  /** Writes the report of the run in {@code runDir} from its metrics and final evaluation. */
  public static Path report(Path runDir, EvalResult eval, List<String> classes) throws IOException {
    return TrainingReport.write(runDir, "val", eval, classes, RunJournal.of(runDir)::claim);
  }
}
