package dev.ramtrain.jobs.train;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.OffloadSettings;
import dev.ramtrain.jobs.config.TrainSettings;
import dev.ramtrain.jobs.report.TrainingReport;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.Trainer;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.Normalization;
import dev.ramtrain.trainer.data.ShardSet;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
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
  private TrainingRun() {}

  /**
   * Trains on {@code train}, evaluating on {@code val}, writing metrics and checkpoints into {@code
   * run}; {@code source} names the data in the checkpoints, which also record the manifest's resize
   * mode and decoder so that prediction prepares images the same way, and the settings and data
   * fingerprint that a resume is checked against ({@code resumeAnyway} skips that check).
   */
  public static EvalResult run(
      TrainSettings s,
      OffloadSettings offload,
      Manifest manifest,
      ShardSet train,
      ShardSet val,
      String source,
      RunDirectory run,
      boolean resumeAnyway)
      throws IOException {
    ImageShape shape = train.shape();
    List<String> classes = train.classes();
    s.requireModelFits(shape, classes);
    SortedMap<String, String> settings = s.resumeSettings();
    String data = RunFingerprint.data(manifest);
    Checkpoints.Loaded checkpoint = run.checkpoint();
    if (checkpoint != null) {
      RunFingerprint.requireSameRun(checkpoint, settings, data, resumeAnyway);
    }
    try (Backend backend = new CpuBackend(s.threads());
        DataLoader trainLoader = new DataLoader(backend, train, s.trainLoader());
        DataLoader valLoader = new DataLoader(backend, val, s.evalLoader())) {
      Normalization measured =
          checkpoint != null
              ? Normalization.fromState(checkpoint.state())
              : s.normalizationGiven() ? null : Normalization.measure(train, 10_000);
      var options =
          s.options(
              measured == null ? null : measured.mean(), measured == null ? null : measured.std());
      Stream setup = backend.createStream("setup");
      try (Learner learner =
              TrainingPlacement.learner(s, offload, shape, options.clipNorm(), backend, setup);
          MetricsLog metrics = run.metrics();
          Trainer trainer =
              new Trainer(
                  backend,
                  learner,
                  s.schedule(trainLoader.batchesPerEpoch()),
                  options,
                  shape,
                  metrics)) {
        System.out.printf(
            "training %s (%,d parameters) on %s: %,d train / %,d val samples, %d classes, %d batches of %d per epoch; normalization mean %s std %s%n",
            s.model(),
            learner.parameterCount(),
            source,
            trainLoader.samples(),
            valLoader.samples(),
            classes.size(),
            trainLoader.batchesPerEpoch(),
            s.batchSize(),
            Arrays.toString(options.mean()),
            Arrays.toString(options.std()));
        Map<String, Object> info = new TreeMap<>(RunFingerprint.record(settings, data));
        info.put("classes", classes);
        info.put("image", List.of(shape.height(), shape.width(), shape.channels()));
        info.put("mean", options.mean());
        info.put("std", options.std());
        info.put("dataset", source);
        info.put("resize", manifest.transforms().get("resize"));
        info.put("decoder", manifest.transforms().get("decoder"));
        run.recordInCheckpoints(info);
        trainer.checkpointTo(run);
        int firstEpoch = 0;
        if (checkpoint != null) {
          learner.restore(checkpoint, setup);
          trainer.resumeAt(checkpoint.globalStep());
          firstEpoch = checkpoint.epochsDone();
          System.out.printf(
              "resuming from %s after %d epochs, step %d%n",
              checkpoint.dir(), firstEpoch, checkpoint.globalStep());
        }
        trainer.fit(trainLoader, valLoader, firstEpoch);
        return trainer.evaluate(valLoader);
      }
    }
  }

  /** Writes the run's report from its metrics and final evaluation; returns index.html. */
  public static Path report(TrainSettings s, EvalResult eval, List<String> classes)
      throws IOException {
    Path run = Path.of(s.output());
    return TrainingReport.write(run, run.resolve(RunDirectory.METRICS), eval, classes);
  }
}
