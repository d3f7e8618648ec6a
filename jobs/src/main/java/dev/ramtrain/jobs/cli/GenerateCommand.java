package dev.ramtrain.jobs.cli;

import dev.ramtrain.etl.source.SyntheticImages;
import dev.ramtrain.jobs.config.ConfigException;
import dev.ramtrain.jobs.config.RamtrainConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
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
  @Mixin CommonOptions common;

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
    f.put("ramtrain.generate.classes", CommonOptions.text(classes));
    f.put("ramtrain.generate.images-per-class", CommonOptions.text(perClass));
    f.put("ramtrain.generate.width", CommonOptions.text(width));
    f.put("ramtrain.generate.height", CommonOptions.text(height));
    f.put("ramtrain.seed", CommonOptions.text(seed));
    return f;
  }

  static int run(RamtrainConfig config) throws IOException {
    String out = config.string("ramtrain.generate.output");
    RamtrainConfig.require(
        !out.isBlank(),
        "ramtrain.generate.output",
        "an output directory is required (--output DIR)");
    return write(config, Path.of(out));
  }

  /** Writes the images the settings describe into {@code root}, a new or empty directory. */
  public static int write(RamtrainConfig config, Path root) throws IOException {
    SyntheticImages images;
    try {
      images =
          new SyntheticImages(
              config.integer("ramtrain.generate.classes"),
              config.integer("ramtrain.generate.images-per-class"),
              config.integer("ramtrain.generate.width"),
              config.integer("ramtrain.generate.height"),
              config.number("ramtrain.generate.jpeg-fraction"),
              config.longValue("ramtrain.seed"));
    } catch (IllegalArgumentException e) {
      throw new ConfigException("ramtrain.generate: " + e.getMessage());
    }
    if (Files.isDirectory(root)) {
      try (Stream<Path> entries = Files.list(root)) {
        if (entries.findAny().isPresent()) {
          throw new ConfigException(
              "ramtrain.generate.output = "
                  + root.toAbsolutePath()
                  + " is not empty: generate writes only into a new or empty directory, so that"
                  + " no file of yours is overwritten");
        }
      }
    }
    return images.writeTo(root);
  }
}
