package dev.ramtrain.jobs.cli;

import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.jobs.config.RamtrainConfig;
import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "generate",
    mixinStandardHelpOptions = true,
    header = "Write the generated shapes dataset.",
    description = {
      "Write the generated shapes dataset (JPEG and PNG in class folders).",
      "Runs in this process, on the driver: --master does not distribute it."
    })
public final class GenerateCommand implements Callable<Integer> {
  @Mixin CommonFlags common;

  @Option(
      names = {"-o", "--output"},
      paramLabel = "DIR",
      description = "Output directory (ramtrain.generate.output).")
  String output;

  @Option(
      names = "--classes",
      description = "Number of shape classes, 2..8 (ramtrain.generate.classes).")
  Integer classes;

  @Option(
      names = "--images-per-class",
      description = "Images per class (ramtrain.generate.images-per-class).")
  Integer perClass;

  @Option(names = "--width", description = "Image width (ramtrain.generate.width).")
  Integer width;

  @Option(names = "--height", description = "Image height (ramtrain.generate.height).")
  Integer height;

  @Option(names = "--seed", description = "Seed (ramtrain.seed).")
  Long seed;

  @Override
  public Integer call() throws Exception {
    RamtrainConfig config = common.load(flags());
    int written = run(config);
    System.out.printf(
        "wrote %d images to %s%n", written, config.string("ramtrain.generate.output"));
    return 0;
  }

  Map<String, String> flags() {
    Map<String, String> f = new LinkedHashMap<>();
    f.put("ramtrain.generate.output", output);
    f.put("ramtrain.generate.classes", CommonFlags.text(classes));
    f.put("ramtrain.generate.images-per-class", CommonFlags.text(perClass));
    f.put("ramtrain.generate.width", CommonFlags.text(width));
    f.put("ramtrain.generate.height", CommonFlags.text(height));
    f.put("ramtrain.seed", CommonFlags.text(seed));
    return f;
  }

  static int run(RamtrainConfig config) throws IOException {
    String out = config.string("ramtrain.generate.output");
    RamtrainConfig.require(
        !out.isBlank(),
        "ramtrain.generate.output",
        "an output directory is required (--output DIR)");
    Path root = Path.of(out);
    return EtlSettings.syntheticImages(config, root).writeTo(root);
  }
}
