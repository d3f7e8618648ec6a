package dev.ramtrain.jobs.cli;

import dev.ramtrain.etl.spark.InMemoryShards;
import dev.ramtrain.etl.spark.PreprocessJob;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.train.InMemoryTraining;
import dev.ramtrain.jobs.train.JobSpec;
import dev.ramtrain.jobs.train.TrainSettings;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "pipeline",
    mixinStandardHelpOptions = true,
    header = "Preprocess into executor memory and train there.",
    description = {
      "Preprocess a raw dataset into in-memory Arrow shards on the executors and train "
          + "on them in the same Spark application: one data-parallel rank per executor "
          + "holding shards (or --ranks), each training on the shards cached where it runs. "
          + "Only the run directory is written. With --master the whole job runs on that "
          + "cluster."
    })
public final class PipelineCommand implements Callable<Integer> {
  @Mixin CommonFlags common;

  @Mixin EtlFlags etl;

  @Mixin TrainFlags training;

  @Option(names = "--seed", description = "Seed (ramtrain.seed).")
  Long seed;

  @Override
  public Integer call() throws Exception {
    RamtrainConfig config = common.load(flags());
    JobSpec spec = TrainSettings.read(config);
    TrainSettings.Dist dist = TrainSettings.dist(config);
    var options = EtlSettings.preprocessOptions(config);
    try (SparkSession spark = SparkSessions.open("ramtrain pipeline", common.master())) {
      var source = EtlSettings.source(config, spark.sparkContext().hadoopConfiguration());
      try (InMemoryShards shards = new PreprocessJob(spark, source, options).run().inMemory()) {
        Manifest manifest = shards.manifest();
        System.out.println(PreprocessCommand.summary(manifest, "(in memory)"));
        InMemoryTraining.Result result = train(spec, dist, shards);
        TrainCommand.printResult(
            spec,
            result.eval(),
            result.ranks(),
            manifest.classes(),
            spark.sparkContext().hadoopConfiguration());
      }
    }
    return 0;
  }

  /** Trains on {@code shards} and says what the ranks read and what crossed the network. */
  static InMemoryTraining.Result train(
      JobSpec spec, TrainSettings.Dist dist, InMemoryShards shards) {
    InMemoryTraining.Result result = InMemoryTraining.run(spec, dist, shards);
    System.out.printf(
        "%s read %.1f MB of shard blocks, %.1f MB of it over the network (%d shards given"
            + " to another node than their executor's, to balance the ranks)%n",
        TrainCommand.ranks(result.ranks()),
        result.shardBytes() / 1e6,
        result.networkBytes() / 1e6,
        result.movedShards());
    return result;
  }

  private Map<String, String> flags() {
    Map<String, String> f = new LinkedHashMap<>();
    etl.addTo(f);
    training.addTo(f);
    f.put("ramtrain.etl.mode", "memory");
    f.put("ramtrain.seed", CommonFlags.text(seed));
    return f;
  }
}
