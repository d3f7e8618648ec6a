package dev.ramtrain.jobs.cli;

import dev.ramtrain.console.Printable;
import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.report.AtomicFile;
import dev.ramtrain.jobs.report.StaticCharts;
import dev.ramtrain.jobs.train.CheckpointEvaluation;
import dev.ramtrain.jobs.train.JobSpec;
import dev.ramtrain.jobs.train.RunJournal;
import dev.ramtrain.jobs.train.TrainSettings;
import dev.ramtrain.jobs.train.TrainedCheckpoint;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.hadoop.conf.Configuration;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "evaluate",
    mixinStandardHelpOptions = true,
    header = "Evaluate a checkpoint or weights on a dataset split.",
    description = {
      "Evaluate a checkpoint on a dataset split: accuracy, loss, per-class accuracy and "
          + "a confusion matrix PNG. The model, image shape and normalization come from the "
          + "checkpoint; with --model and --weights, the dataset's classes and image size and "
          + "ImageNet's normalization.",
      "Runs in this process, on the driver: --master does not distribute it."
    })
public final class EvaluateCommand implements Callable<Integer> {
  @Mixin CommonFlags common;

  @Mixin CheckpointFlags checkpoint;

  @Option(
      names = {"-d", "--dataset"},
      paramLabel = "DIR",
      description =
          "Dataset directory (ramtrain.train.dataset). Default with --checkpoint: the dataset the"
              + " checkpoint's run trained on.")
  String dataset;

  /** Evaluation's default batch, as predict's: ramtrain.train.batch-size is sized for training. */
  static final int DEFAULT_BATCH = 64;

  @Option(
      names = "--batch-size",
      description =
          "Images per forward pass. Default: ramtrain.train.batch-size, at most "
              + DEFAULT_BATCH
              + ".")
  Integer batchSize;

  @Option(
      names = "--split",
      defaultValue = "val",
      description = "Split to evaluate (default ${DEFAULT-VALUE}).")
  String split;

  @Mixin OffloadFlag offload;

  @Option(
      names = {"-o", "--confusion"},
      paramLabel = "PNG",
      description =
          "Where to draw the confusion matrix (default: the checkpoint's run's report folder,"
              + " evaluate-SPLIT-CHECKPOINT.png; beside the checkpoint when it is in no run).")
  Path confusionPng;

  /**
   * Where the confusion matrix goes when no path is given: the report folder of the run the
   * checkpoint belongs to (RUN/checkpoints/NAME), else beside the checkpoint folder; named after
   * the split and the checkpoint, so it replaces no report of the training run.
   */
  static Path defaultConfusion(Path checkpointDir, String split) {
    Path dir = checkpointDir.toAbsolutePath().normalize();
    String name = "evaluate-" + split + "-" + dir.getFileName() + ".png";
    Path run = runOf(dir);
    return run != null ? run.resolve("report").resolve(name) : dir.getParent().resolve(name);
  }

  /** The run directory a checkpoint folder is in ({@code RUN/checkpoints/NAME}), or null. */
  private static Path runOf(Path checkpointDir) {
    Path parent = checkpointDir.toAbsolutePath().normalize().getParent();
    boolean inRun = parent != null && parent.getFileName().toString().equals("checkpoints");
    return inRun ? parent.getParent() : null;
  }

  /**
   * The dataset a checkpoint's run trained on, as its state records it: given relative to where
   * that run started, so used only where it still names a directory from here.
   */
  static String trainedOn(Checkpoints.Loaded checkpoint) {
    Object recorded = checkpoint.state().get("dataset");
    if (recorded == null || !Files.isDirectory(Path.of(recorded.toString()))) {
      throw new ConfigException(
          "--dataset: the checkpoint "
              + checkpoint.dir()
              + " was trained on "
              + (recorded == null ? "a dataset it does not name" : "'" + recorded + "'")
              + ", which is not a directory from here; give -d DIR");
    }
    return recorded.toString();
  }

  @Override
  public Integer call() throws Exception {
    if (batchSize != null && batchSize < 1) {
      throw new ConfigException("evaluate --batch-size must be >= 1, got " + batchSize);
    }
    boolean pretrained = checkpoint.pretrained();
    TrainedCheckpoint trained = pretrained ? null : checkpoint.open();
    Map<String, String> flags = new LinkedHashMap<>();
    flags.putAll(offload.settings());
    flags.put(
        "ramtrain.train.dataset",
        dataset != null || pretrained ? dataset : trainedOn(trained.loaded()));
    RamtrainConfig config = common.load(flags);
    int batch =
        batchSize != null
            ? batchSize
            : Math.min(DEFAULT_BATCH, config.integer("ramtrain.train.batch-size"));
    flags.put("ramtrain.train.batch-size", Integer.toString(batch));
    JobSpec s = TrainSettings.read(common.load(flags));
    String location = s.run().data().requireLocation();
    if (pretrained) { // the dataset's classes and image size
      Manifest m = Dataset.open(location, new Configuration()).manifest();
      trained = checkpoint.openPretrained(checkpoint.readWeights(), m.classes(), m.image().shape());
    }
    Checkpoints.Loaded c = trained.loaded();
    EvalResult eval = CheckpointEvaluation.run(s, trained, location, split, new Configuration());
    List<String> classes = trained.classes();
    System.out.printf(
        "%s on %s/%s: accuracy %.4f, loss %.4f over %,d samples%n",
        Printable.of(c.dir().toString()),
        Printable.of(location),
        split,
        eval.accuracy(),
        eval.loss(),
        eval.samples());
    for (int k = 0; k < classes.size(); k++) {
      double accuracy = eval.classAccuracy(k); // NaN: the split holds none of the class
      System.out.printf(
          "  %-20s %s%n",
          Printable.of(classes.get(k)),
          Double.isNaN(accuracy) ? "no samples" : String.format("%.4f", accuracy));
    }
    Path png = confusionPng != null ? confusionPng : defaultConfusion(c.dir(), split);
    Path run = runOf(c.dir());
    if (confusionPng == null && run != null) {
      RunJournal.of(run).claim(png); // the run's report folder: a file of ramtrain's, recorded
    } else {
      OutputFile.requireReplaceable(
          png, "evaluate -o", List.of(c.dir(), Path.of(location)), AtomicFile::isRamtrainPng);
    }
    Path parent = png.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    StaticCharts.confusion(
        png,
        String.format(
            "Confusion matrix, %% of each true class (%s accuracy %.2f%%)",
            split, 100 * eval.accuracy()),
        classes,
        eval.confusion());
    System.out.println("confusion matrix " + png.toAbsolutePath());
    return 0;
  }
}
