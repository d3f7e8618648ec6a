package dev.ramtrain.jobs.cli;

import dev.ramtrain.console.Printable;
import dev.ramtrain.etl.spark.PreprocessJob;
import dev.ramtrain.etl.spark.PreprocessResult;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.jobs.config.RamtrainConfig;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "preprocess",
    mixinStandardHelpOptions = true,
    header = "Preprocess raw images into a committed dataset of Arrow shards.",
    description = {
      "Decode, resize and augment a raw dataset into Arrow shards with Spark, and "
          + "commit them atomically to a dataset directory (manifest.json last). Sources: "
          + "image folders, Parquet tables, MNIST-family idx files, CIFAR-10 binaries."
    })
public final class PreprocessCommand implements Callable<Integer> {
  @Mixin CommonFlags common;

  @Mixin EtlFlags etl;

  @Option(
      names = {"-o", "--output"},
      paramLabel = "DIR",
      description = "Dataset directory to commit (ramtrain.etl.output).")
  String output;

  @Option(
      names = "--overwrite",
      description = "Replace a committed dataset (ramtrain.etl.overwrite).")
  Boolean overwrite;

  @Option(names = "--seed", description = "Seed (ramtrain.seed).")
  Long seed;

  @Override
  public Integer call() throws Exception {
    System.out.print(run(common.load(flags()), common.master(), "ramtrain preprocess"));
    return 0;
  }

  /** Runs the preprocessing job the settings describe; returns the summary shown to the user. */
  static String run(RamtrainConfig config, String master, String appName) throws IOException {
    var options = EtlSettings.preprocessOptions(config);
    try (SparkSession spark = SparkSessions.open(appName, master)) {
      var source = EtlSettings.source(config, spark.sparkContext().hadoopConfiguration());
      long start = System.nanoTime();
      PreprocessResult result = new PreprocessJob(spark, source, options).run();
      double seconds = (System.nanoTime() - start) / 1e9;
      Manifest manifest = result.manifest();
      long inputs = manifest.rejects().inputs();
      return String.format(
          "%s%npreprocessed %,d inputs in %.1f s (%,.0f inputs/s)%n%s%n",
          summary(manifest, options.outputPath()),
          inputs,
          seconds,
          inputs / seconds,
          result.timing().describe());
    }
  }

  Map<String, String> flags() {
    Map<String, String> f = new LinkedHashMap<>();
    etl.addTo(f);
    f.put("ramtrain.etl.output", output);
    f.put("ramtrain.etl.overwrite", CommonFlags.text(overwrite));
    f.put("ramtrain.seed", CommonFlags.text(seed));
    return f;
  }

  static String summary(Manifest m, String output) {
    Manifest.Split train = m.split(Manifest.TRAIN);
    Manifest.Split val = m.split(Manifest.VAL);
    String rejects =
        m.rejects().count() == 0
            ? "no inputs rejected"
            : m.rejects().count()
                + " inputs rejected "
                + m.rejects().byReason()
                + (m.rejects().file() == null
                    ? ""
                    : " (listed in " + output + "/" + m.rejects().file() + ")");
    return String.format(
        "dataset %s: %,d train + %,d val samples of %dx%dx%d in %d + %d shards (%.1f MB), %d classes; %s",
        Printable.of(output),
        train.rows(),
        val.rows(),
        m.image().height(),
        m.image().width(),
        m.image().channels(),
        train.shards().size(),
        val.shards().size(),
        (train.bytes() + val.bytes()) / 1e6,
        m.classes().size(),
        rejects);
  }
}
