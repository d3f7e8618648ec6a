package dev.ramtrain.jobs.cli;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.dataset.VersionLease;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.train.DatasetShards;
import dev.ramtrain.jobs.train.DistributedTraining;
import dev.ramtrain.jobs.train.ExecutorRanks;
import dev.ramtrain.jobs.train.JobSpec;
import dev.ramtrain.jobs.train.RecordedSettings;
import dev.ramtrain.jobs.train.RemainderNotice;
import dev.ramtrain.jobs.train.RunDirectory;
import dev.ramtrain.jobs.train.RunReports;
import dev.ramtrain.jobs.train.TrainSettings;
import dev.ramtrain.jobs.train.TrainerResources;
import dev.ramtrain.jobs.train.TrainingRun;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.run.TrainingData;
import java.io.IOException;
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
    header = "Train a model on a preprocessed dataset.",
    description = {
      "Train a model on a preprocessed dataset (its train split), evaluating on its val "
          + "split each epoch."
    })
public final class TrainCommand implements Callable<Integer> {
  @Mixin CommonFlags common;

  @Option(
      names = {"-d", "--dataset"},
      paramLabel = "DIR",
      description = "Dataset directory (ramtrain.train.dataset).")
  String dataset;

  @Mixin TrainFlags training;

  // train's own: in pipeline, --height and --width are the stored size (EtlFlags).
  @Option(
      names = "--height",
      description =
          "The model's input height: the crop's output with --augment rrc; 0: the stored height"
              + " (ramtrain.train.augment.height).")
  Integer height;

  @Option(
      names = "--width",
      description =
          "The model's input width: the crop's output with --augment rrc; 0: the stored width"
              + " (ramtrain.train.augment.width).")
  Integer width;

  @Option(names = "--seed", description = "Seed (ramtrain.seed).")
  Long seed;

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

  @Override
  public Integer call() throws Exception {
    Map<String, String> flags = flags();
    if (resume) { // the run's own settings where nothing given sets them: what is given changes
      RamtrainConfig given = common.load(flags);
      Map<String, String> set = given.resolved();
      Map<String, String> defaults = RamtrainConfig.flat(RamtrainConfig.defaults());
      String output = given.string("ramtrain.train.output");
      if (!output.isBlank() && !output.contains("://")) {
        RecordedSettings.of(Path.of(output))
            .forEach(
                (key, value) -> {
                  if (java.util.Objects.equals(set.get(key), defaults.get(key))) {
                    flags.putIfAbsent(key, RamtrainConfig.flagText(key, value));
                  }
                });
      }
    }
    RamtrainConfig config = common.load(flags);
    JobSpec spec = TrainSettings.read(config);
    if (resume) {
      spec = spec.resuming(resumeAnyway);
    } else if (resumeAnyway) {
      throw new ConfigException("--resume-anyway goes with --resume");
    }
    TrainSettings.Dist dist = TrainSettings.dist(config);
    String master = SparkSessions.master(common.master());
    boolean cluster = master != null && !master.startsWith("local");
    if (!cluster) {
      dist = dist.withRanks(dist.ranksOr(1)); // on a cluster: one per executor, once they are known
      spec = TrainSettings.shareCores(spec, config, dist.ranks());
    }
    String location = spec.run().data().requireLocation();
    // The version read is held until the run ends: a preprocess --overwrite meanwhile keeps it.
    try (VersionLease lease =
        VersionLease.take(location, new Configuration(), "train " + spec.output().dir())) {
      return train(spec, dist, cluster, master, location, lease.dataset());
    }
  }

  private int train(
      JobSpec spec,
      TrainSettings.Dist dist,
      boolean cluster,
      String master,
      String location,
      Dataset ds)
      throws IOException, InterruptedException {
    spec = spec.forDataset(ds.manifest()); // a model that does not fit is refused before Spark
    Manifest.Split trainSplit = ds.manifest().splits().get(Manifest.TRAIN);
    if (trainSplit != null) {
      RemainderNotice.of(
              trainSplit.rows(),
              spec.run().batchSize(),
              spec.run().loop().accumulate(),
              spec.run().data().train().sampling().remainder())
          .ifPresent(System.out::println);
    }
    // A run directory on HDFS or S3A is written by a trainer task, which publishes checkpoints.
    boolean onSpark = cluster || dist.ranks() > 1 || master != null;
    if (onSpark || spec.output().remote()) {
      return trainOnSpark(spec, dist, ds.manifest());
    }
    // The run directory first: refusing it is quick, checksumming every shard is not.
    try (RunDirectory run =
            RunDirectory.open(
                spec.output().path(), spec.output().mode(), spec.output().keepCheckpoints());
        ShardSet train =
            DatasetShards.open(ds, Manifest.TRAIN, shard -> true, spec.run().data().shardWindow());
        ShardSet val =
            DatasetShards.open(ds, Manifest.VAL, shard -> true, spec.run().data().shardWindow())) {
      EvalResult eval =
          TrainingRun.run(spec, new TrainingData(train, val, ds.manifest(), location), run);
      Path report = TrainingRun.report(spec.output().path(), eval, train.classes());
      System.out.printf(
          "val accuracy %.4f, loss %.4f over %,d samples; report %s%n",
          eval.accuracy(), eval.loss(), eval.samples(), report);
    }
    return 0;
  }

  /**
   * One trainer task per rank in a Spark barrier stage; rank 0 writes the run directory. Ranks not
   * given: one per executor.
   */
  private int trainOnSpark(JobSpec spec, TrainSettings.Dist dist, Manifest manifest)
      throws IOException, InterruptedException {
    try (SparkSession spark = SparkSessions.open("ramtrain train", common.master())) {
      if (dist.ranks() == TrainSettings.AUTO_RANKS) {
        ExecutorRanks.Choice choice =
            ExecutorRanks.choose(
                spark.sparkContext(),
                spec.run().batchSize(),
                TrainerResources.clusterDevicesPerNode(dist, spark.sparkContext().getConf()));
        System.out.printf("training with %s: %s%n", ranks(choice.ranks()), choice.why());
        dist = dist.withRanks(choice.ranks());
      }
      EvalResult eval = DistributedTraining.run(spark, spec, dist, manifest);
      printResult(
          spec, eval, dist.ranks(), manifest.classes(), spark.sparkContext().hadoopConfiguration());
    }
    return 0;
  }

  /** "1 rank", "2 ranks". */
  static String ranks(int count) {
    return count == 1 ? "1 rank" : count + " ranks";
  }

  /**
   * Prints the final evaluation of a run trained in a Spark barrier stage and writes its report
   * into the run directory, wherever that is (read back and written through {@code conf}'s
   * filesystems when remote).
   */
  static void printResult(
      JobSpec spec, EvalResult eval, int ranks, List<String> classes, Configuration conf)
      throws IOException {
    System.out.printf(
        "val accuracy %.4f, loss %.4f over %,d samples (%s)%n",
        eval.accuracy(), eval.loss(), eval.samples(), ranks(ranks));
    String report = RunReports.write(spec.output(), eval, classes, conf);
    if (report != null) {
      System.out.printf("report %s%n", report);
    }
  }

  Map<String, String> flags() {
    Map<String, String> f = new LinkedHashMap<>();
    f.put("ramtrain.train.dataset", dataset);
    training.addTo(f);
    f.put("ramtrain.train.augment.height", CommonFlags.text(height));
    f.put("ramtrain.train.augment.width", CommonFlags.text(width));
    f.put("ramtrain.seed", CommonFlags.text(seed));
    return f;
  }
}
