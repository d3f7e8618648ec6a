package dev.ramtrain.jobs.cli;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.SparkSessions;
import dev.ramtrain.jobs.config.ConfigException;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.config.TrainSettings;
import dev.ramtrain.jobs.train.DatasetShards;
import dev.ramtrain.jobs.train.DistributedTraining;
import dev.ramtrain.jobs.train.RunDirectory;
import dev.ramtrain.jobs.train.RunSpec;
import dev.ramtrain.jobs.train.TrainingData;
import dev.ramtrain.jobs.train.TrainingRun;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.offload.OffloadSpec;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "train",
    mixinStandardHelpOptions = true,
    description =
        "Train a model on a preprocessed dataset (its train split), evaluating on its val split each epoch.")
public final class TrainCommand implements Callable<Integer> {
  @Mixin CommonOptions common;

  @Option(
      names = {"-d", "--dataset"},
      paramLabel = "DIR",
      description = "Dataset directory (ramtrain.train.dataset).")
  String dataset;

  @Option(
      names = {"-o", "--output"},
      paramLabel = "DIR",
      description = "Run directory (ramtrain.train.output).")
  String output;

  @Option(
      names = "--model",
      description = "Model spec, e.g. mlp:784-1024-1024-10 (ramtrain.train.model).")
  String model;

  @Option(names = "--epochs", description = "Epochs (ramtrain.train.epochs).")
  Integer epochs;

  @Option(names = "--batch-size", description = "Batch size (ramtrain.train.batch-size).")
  Integer batchSize;

  @Option(names = "--optimizer", description = "adamw or sgd (ramtrain.train.optimizer).")
  String optimizer;

  @Option(names = "--lr", description = "Learning rate (ramtrain.train.lr).")
  Double lr;

  @Option(names = "--seed", description = "Seed (ramtrain.seed).")
  Long seed;

  @Option(
      names = "--ranks",
      description =
          "Data-parallel ranks, one trainer task each in a Spark barrier stage; --batch-size is"
              + " the global batch (ramtrain.dist.ranks).")
  Integer ranks;

  @Option(
      names = "--offload",
      paramLabel = "MODE",
      description =
          "auto (offload when resident does not fit the budget), on or off"
              + " (ramtrain.offload.mode).")
  String offload;

  @Option(
      names = "--device-budget",
      paramLabel = "SIZE",
      description = "Device memory budget, e.g. 6GiB (ramtrain.offload.budget).")
  String deviceBudget;

  @Option(
      names = "--resume",
      description =
          "Continue the run in --output from its latest checkpoint (same settings and data).")
  boolean resume;

  @Option(
      names = "--resume-anyway",
      description =
          "With --resume: continue even though settings or data differ from the checkpoint's.")
  boolean resumeAnyway;

  @Option(
      names = "--overwrite",
      description =
          "Replace the run in --output; it is deleted once the new run has saved its first"
              + " checkpoint (ramtrain.train.overwrite).")
  Boolean overwrite;

  @Override
  public Integer call() throws Exception {
    RamtrainConfig config = common.load(flags());
    RunSpec spec = TrainSettings.read(config);
    if (resume) {
      spec = spec.resuming(resumeAnyway);
    } else if (resumeAnyway) {
      throw new ConfigException("--resume-anyway goes with --resume");
    }
    TrainSettings.Dist dist = TrainSettings.dist(config);
    String location = spec.data().requireLocation();
    Dataset ds = Dataset.open(location, new Configuration());
    spec.model().requireFits(ds.manifest().image().shape(), ds.manifest().classes());
    if (dist.zero() == 1 && spec.offload().mode() != OffloadSpec.Mode.ON) {
      throw new ConfigException(
          "ramtrain.dist.zero = 1 partitions the host optimizer's state: it needs offloaded"
              + " training (ramtrain.offload.mode = on, --offload on)");
    }
    if (dist.ranks() > 1 || common.master() != null) {
      return trainOnSpark(spec, dist, ds.manifest().classes());
    }
    // The run directory first: refusing it is quick, checksumming every shard is not.
    try (RunDirectory run = RunDirectory.open(spec.output().path(), spec.output().mode());
        ShardSet train = DatasetShards.open(ds, Manifest.TRAIN);
        ShardSet val = DatasetShards.open(ds, Manifest.VAL)) {
      EvalResult eval =
          TrainingRun.run(spec, new TrainingData(train, val, ds.manifest(), location), run);
      Path report = TrainingRun.report(spec.output().path(), eval, train.classes());
      System.out.printf(
          "val accuracy %.4f, loss %.4f over %,d samples; report %s%n",
          eval.accuracy(), eval.loss(), eval.samples(), report);
    }
    return 0;
  }

  /** One trainer task per rank in a Spark barrier stage; rank 0 writes the run directory. */
  private int trainOnSpark(RunSpec spec, TrainSettings.Dist dist, List<String> classes)
      throws IOException {
    try (SparkSession spark = SparkSessions.open("ramtrain train", common.master())) {
      EvalResult eval = DistributedTraining.run(spark, spec, dist);
      Path runDir = spec.output().path();
      System.out.printf(
          "val accuracy %.4f, loss %.4f over %,d samples (%d ranks)%n",
          eval.accuracy(), eval.loss(), eval.samples(), dist.ranks());
      if (Files.exists(runDir.resolve(RunDirectory.METRICS))) {
        System.out.printf("report %s%n", TrainingRun.report(runDir, eval, classes));
      }
    }
    return 0;
  }

  Map<String, String> flags() {
    Map<String, String> f = new LinkedHashMap<>();
    f.put("ramtrain.train.dataset", dataset);
    f.put("ramtrain.train.output", output);
    f.put("ramtrain.train.model", model);
    f.put("ramtrain.train.epochs", CommonOptions.text(epochs));
    f.put("ramtrain.train.batch-size", CommonOptions.text(batchSize));
    f.put("ramtrain.train.optimizer", optimizer);
    f.put("ramtrain.train.lr", CommonOptions.text(lr));
    f.put("ramtrain.seed", CommonOptions.text(seed));
    f.put("ramtrain.dist.ranks", CommonOptions.text(ranks));
    f.put("ramtrain.offload.mode", offload);
    f.put("ramtrain.offload.budget", deviceBudget);
    f.put("ramtrain.train.overwrite", CommonOptions.text(overwrite));
    return f;
  }
}
