package dev.ramtrain.trainer.run;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.settings.Spelling;
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
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.slf4j.MDC;

/**
 * One training run over opened shards, wherever they come from (a dataset directory for {@code
 * train}, cached in-memory shards in a Spark task): checks that the model fits the data, builds the
 * backend, loaders, model, placement and optimizer its {@link RunSpec} describes, restores the
 * checkpoint it resumes from, trains with a checkpoint per epoch and evaluates on the val split.
 * The loop itself is {@link Trainer}; reading settings, checking that a checkpoint is this run's
 * and the run directory are the job's.
 */
public final class TrainingSession {
  /** The logging context key that keeps a line off the console (the log file still has it). */
  public static final String QUIET = "ramtrain.quiet";

  /** Samples the input normalization is measured on (the first, in shard order). */
  private static final int NORMALIZATION_SAMPLES = 10_000;

  private TrainingSession() {}

  /**
   * Trains as {@code spec} says ({@link RunSpec#forRank} already, on a data-parallel rank) on
   * {@code data}, writing into {@code output}; returns the evaluation over all ranks. {@code
   * natives} decode and resize for the loaders.
   */
  public static EvalResult run(
      RunSpec spec, TrainingData data, RunOutput output, RankContext rank, ImageNatives natives)
      throws IOException {
    DataParallel ranks = rank.ranks();
    ShardSet train = data.train();
    ShardSet val = data.val();
    requireBothSplits(data);
    ImageShape shape = spec.data().train().inputShape(train.shape()); // the model's input
    List<String> classes = train.classes();
    spec = spec.forDataset(train.shape(), classes);
    RunFolder run = output.folder();
    Checkpoints.Loaded checkpoint = output.resumeFrom();
    RunData d = spec.data();
    if (!rank.speaks()) {
      // The other ranks in this process log the same set-up as rank 0 (the backend's lines):
      // to the log file only (conf/log4j2.properties keeps them off the console).
      MDC.put(QUIET, "true");
    }
    try (Backend backend = Backends.open(spec.backend());
        DataLoader trainLoader = d.loader(backend, train, d.train(), d.filter(), natives);
        DataLoader valLoader = d.loader(backend, val, d.eval(), d.filter(), natives)) {
      requireABatch(spec, trainLoader, ranks);
      ShardMemory.report(trainLoader, valLoader, d.shardWindow(), rank.hostLimit(), rank.speaks());
      LoopSpec options = spec.loop();
      if (!options.normalizationGiven()) { // a resumed run keeps what its first epoch measured
        Normalization n =
            checkpoint != null
                ? Normalization.fromState(
                    checkpoint.state(), checkpoint.dir().resolve("state.json"))
                : measure(train, d.train().rank(), ranks, natives);
        options = options.withNormalization(n.mean(), n.std());
      }
      Stream setup = backend.createStream("setup");
      try (Learner learner =
              Placement.learner(
                  spec, shape, options, backend, setup, ranks, rank.hostLimit(), rank.node());
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
        MDC.remove(QUIET); // set up: a rank's own warnings reach the console again
        if (ranks.worldSize() > 1) { // its own numbers: every rank says them
          System.out.printf(
              "rank %d of %d: %,d train / %,d val samples, %,d of them each epoch in batches of"
                  + " %d%n",
              ranks.rank(),
              ranks.worldSize(),
              trainLoader.samples(),
              valLoader.samples(),
              trainLoader.batchesPerEpoch() * (long) spec.batchSize(),
              spec.batchSize());
        }
        if (rank.speaks()) {
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
        }
        if (run != null) {
          Map<String, Object> info = new TreeMap<>(output.record());
          info.putAll(record(spec, data, shape, options));
          info.put("train_samples", trainLoader.samples());
          info.put("val_samples", valLoader.samples());
          info.put("parameters", learner.parameterCount());
          run.recordInCheckpoints(info);
        }
        trainer.checkpointTo(run, output.checkpointEvery()); // every rank: the same cadence
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
          requireAverage(checkpoint);
          learner.averageWeights(spec.model().emaDecay(), checkpoint, setup);
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
          String digest = digest(learner.weights(setup)); // the optimizer state stays put
          ranks.requireSame(digest.getBytes(StandardCharsets.US_ASCII), "final weights");
          if (rank.speaks()) {
            System.out.printf(
                "rank %d of %d: final weights identical on every rank (%s)%n",
                ranks.rank(), ranks.worldSize(), digest);
          }
        }
        return eval;
      }
    } finally {
      MDC.remove(QUIET); // also where set-up failed: the task's thread serves later tasks
    }
  }

  /**
   * A checkpoint of a run that averaged its weights holds the average: resuming without it would
   * restart the average from the weights, silently (a deleted model_ema.safetensors did).
   */
  private static void requireAverage(Checkpoints.Loaded checkpoint) throws IOException {
    if (checkpoint == null || !checkpoint.averaged().isEmpty()) {
      return;
    }
    Object settings = checkpoint.state().get("settings");
    Object ema = settings instanceof Map<?, ?> recorded ? recorded.get(EMA_KEY) : null;
    if (ema != null && Double.parseDouble(String.valueOf(ema)) > 0) {
      throw new IOException(
          checkpoint.dir().resolve(Checkpoints.AVERAGED)
              + " is missing, though the run averaged its weights ("
              + EMA_KEY
              + " = "
              + ema
              + "): restore it, or resume from another checkpoint");
    }
  }

  private static final String EMA_KEY = "ramtrain.train.ema";

  private static void requireBothSplits(TrainingData data) {
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
  }

  private static void requireABatch(RunSpec spec, DataLoader trainLoader, DataParallel ranks) {
    if (trainLoader.batchesPerEpoch() > 0) {
      return;
    }
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

  /**
   * What serving the run needs to prepare images and build the model as trained, recorded in every
   * checkpoint: classes, input shape, precision, the eval crop, normalization and how the dataset
   * was made.
   */
  private static Map<String, Object> record(
      RunSpec spec, TrainingData data, ImageShape shape, LoopSpec options) {
    Map<String, Object> info = new TreeMap<>();
    info.put("classes", data.train().classes());
    info.put("image", List.of(shape.height(), shape.width(), shape.channels()));
    info.put("precision", Spelling.of(spec.model().precision()));
    if (spec.data().eval().augmentation().resize() instanceof CenterCrop crop) {
      ImageShape stored = data.train().shape(); // what serving resizes raw images to first
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
              Spelling.of(spec.data().filter())));
    }
    info.put("mean", options.mean());
    info.put("std", options.std());
    info.put("dataset", data.source());
    Map<String, Object> transforms = data.manifest().transforms();
    info.put("resize", transforms.get("resize"));
    info.put("decoder", transforms.get("decoder"));
    info.put("exif_orientation", transforms.getOrDefault("exif-orientation", "ignore"));
    return info;
  }

  /**
   * The normalization every rank uses: where ranks hold shards of their own, measured by each on
   * its share of the samples and added up over the ranks, so that all normalize alike.
   */
  private static Normalization measure(
      ShardSet train, LoaderSpec.Rank rank, DataParallel ranks, ImageNatives natives) {
    if (!rank.ownShards()) {
      return Normalization.measure(train, NORMALIZATION_SAMPLES, natives.jpeg());
    }
    int share = Math.max(1, NORMALIZATION_SAMPLES / rank.worldSize());
    return Normalization.fromMoments(
        ranks.sum(Normalization.moments(train, share, natives.jpeg())));
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
}
