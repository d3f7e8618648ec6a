package dev.ramtrain.jobs.cli;

import dev.ramtrain.console.Printable;
import dev.ramtrain.etl.source.SyntheticImages;
import dev.ramtrain.etl.spark.InMemoryShards;
import dev.ramtrain.etl.spark.PreprocessJob;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.train.JobSpec;
import dev.ramtrain.jobs.train.TrainSettings;
import dev.ramtrain.jobs.train.TrainingRun;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.EvalResult;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    header = "Generate, preprocess and train in one Spark application.",
    description = {
      "The whole pipeline in one Spark application on a generated dataset: generate "
          + "shapes images, preprocess them into in-memory Arrow shards, train a CNN in a "
          + "Spark barrier stage (one rank per executor, on the shards cached there), and "
          + "write the report (curves and confusion matrix). Any setting can be changed with "
          + "--set, e.g. --set ramtrain.train.epochs=3."
    })
public final class DemoCommand implements Callable<Integer> {
  /** The demo's CNN without its class count, which comes from the generated dataset. */
  static final String MODEL = "cnn:cb32-p-cb64-p-cb128-p-f128";

  @Mixin CommonFlags common;

  @Option(
      names = "--workdir",
      paramLabel = "DIR",
      description = "Where everything goes (ramtrain.demo.workdir).")
  String workdir;

  @Option(
      names = "--images-per-class",
      description = "Generated images per class (default ${DEFAULT-VALUE}).")
  int perClass = 1000;

  @Option(names = "--size", description = "Images are SIZE x SIZE (default ${DEFAULT-VALUE}).")
  int size = 32;

  @Option(names = "--epochs", description = "Training epochs (default ${DEFAULT-VALUE}).")
  int epochs = 6;

  @Option(
      names = "--model",
      description = "Model spec (default " + MODEL + "-<classes>).",
      paramLabel = "SPEC")
  String model;

  @Override
  public Integer call() throws Exception {
    RamtrainConfig base = common.load(flags(null, null));
    Path work = Path.of(base.string("ramtrain.demo.workdir")).toAbsolutePath();
    RamtrainConfig config = common.load(flags(work, null));
    Path images = work.resolve("images");
    Path run = work.resolve("run");

    System.out.println("[1/4] generate: shapes images under " + images);
    if (Files.isDirectory(images)) {
      System.out.println("      (already there; delete it to regenerate)");
    } else {
      // Into a folder of the demo's own first, renamed when whole: a demo killed while
      // generating leaves no half set that the next one would take for the whole.
      Path partial = work.resolve("images.partial");
      discardPartialImages(partial);
      EtlSettings.syntheticImages(config, partial).writeTo(partial);
      Files.move(partial, images, StandardCopyOption.ATOMIC_MOVE);
    }
    try (SparkSession spark = SparkSessions.open("ramtrain demo", common.master())) {
      System.out.println(
          "[2/4] preprocess: Spark decodes, resizes and shards into executor memory");
      var source = EtlSettings.source(config, spark.sparkContext().hadoopConfiguration());
      var options = EtlSettings.preprocessOptions(config);
      try (InMemoryShards shards = new PreprocessJob(spark, source, options).run().inMemory()) {
        Manifest manifest = shards.manifest();
        System.out.println(
            PreprocessCommand.summary(manifest, "(in memory)").indent(6).stripTrailing());

        System.out.println(
            "[3/4] train: one rank per executor in a Spark barrier stage, run " + run);
        RamtrainConfig trainConfig =
            common.load(
                flags(work, model != null ? model : MODEL + "-" + manifest.classes().size()));
        JobSpec spec = TrainSettings.read(trainConfig);
        EvalResult eval =
            PipelineCommand.train(spec, TrainSettings.dist(trainConfig), shards).eval();

        System.out.println("[4/4] report:");
        Path report = TrainingRun.report(spec.output().path(), eval, manifest.classes());
        StringBuilder perClassText = new StringBuilder();
        List<String> classes = manifest.classes();
        for (int c = 0; c < classes.size(); c++) {
          perClassText.append(
              String.format("%s %.3f  ", Printable.of(classes.get(c)), eval.classAccuracy(c)));
        }
        System.out.printf(
            "      val accuracy %.4f over %,d samples (per class: %s)%n      report %s%n",
            eval.accuracy(), eval.samples(), perClassText.toString().strip(), report);
      }
    }
    return 0;
  }

  /**
   * Removes what a killed demo's generation left, but only if every file in it has the name and
   * place of a generated image: anything else there is someone's, and the demo stops instead.
   */
  private static void discardPartialImages(Path partial) throws IOException {
    if (!Files.exists(partial)) {
      return;
    }
    List<Path> entries;
    try (Stream<Path> walk = Files.walk(partial)) {
      entries = walk.sorted(Comparator.reverseOrder()).toList();
    }
    for (Path p : entries) {
      boolean ours =
          Files.isDirectory(p)
              ? p.equals(partial) || partial.relativize(p).getNameCount() == 1
              : SyntheticImages.isGenerated(partial, p);
      if (!ours) {
        throw new ConfigException(
            "ramtrain.demo.workdir: "
                + p
                + " was not written by the demo; move "
                + partial
                + " away to let the demo generate its images there");
      }
    }
    for (Path p : entries) {
      Files.delete(p);
    }
  }

  private Map<String, String> flags(Path work, String modelSpec) {
    Map<String, String> f = new LinkedHashMap<>();
    f.put("ramtrain.demo.workdir", workdir);
    f.put("ramtrain.generate.images-per-class", String.valueOf(perClass));
    f.put("ramtrain.generate.width", String.valueOf(Math.max(size, 64)));
    f.put("ramtrain.generate.height", String.valueOf(Math.max(size, 64)));
    f.put("ramtrain.etl.height", String.valueOf(size));
    f.put("ramtrain.etl.width", String.valueOf(size));
    f.put("ramtrain.etl.mode", "memory");
    f.put("ramtrain.train.epochs", String.valueOf(epochs));
    f.put("ramtrain.train.batch-size", "64");
    f.put("ramtrain.train.lr", "0.01");
    f.put("ramtrain.train.schedule", "one-cycle");
    f.put("ramtrain.train.crop-padding", "2");
    f.put("ramtrain.train.model", modelSpec);
    f.put("ramtrain.train.overwrite", "true"); // the demo's own run directory: re-run in place
    if (work != null) {
      f.put("ramtrain.generate.output", work.resolve("images").toString());
      f.put("ramtrain.source.path", work.resolve("images").toString());
      f.put("ramtrain.source.type", "image-folder");
      f.put("ramtrain.train.output", work.resolve("run").toString());
    }
    return f;
  }
}
