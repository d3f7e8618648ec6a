package dev.ramtrain.jobs.cli;

import dev.ramtrain.jobs.config.ConfigException;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.config.TrainSettings;
import dev.ramtrain.jobs.train.ImageClassifier;
import dev.ramtrain.jobs.train.ImageFiles;
import dev.ramtrain.jobs.train.TrainedCheckpoint;
import dev.ramtrain.trainer.backend.BackendSpec;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(
    name = "predict",
    mixinStandardHelpOptions = true,
    header = "Classify image files with a checkpoint, as CSV.",
    description = {
      "Classify image files with a checkpoint; writes CSV: path, predicted class, its "
          + "probability, every class's probability, and an error column for files that "
          + "cannot be read. Images go through the preprocessing's decode and resize (mode "
          + "and decoder recorded in the checkpoint) and the training run's normalization, so "
          + "serving sees what training saw.",
      "Runs in this process, on the driver: --master does not distribute it."
    })
public final class PredictCommand implements Callable<Integer> {
  @Mixin CommonOptions common;

  @Mixin CheckpointOption checkpoint;

  @Option(
      names = {"-o", "--output"},
      paramLabel = "CSV",
      description = "Where to write the CSV (default: standard output).")
  Path output;

  @Option(
      names = "--batch-size",
      defaultValue = "64",
      description = "Images per forward pass (default ${DEFAULT-VALUE}).")
  int batchSize;

  @Parameters(
      arity = "1..*",
      paramLabel = "IMAGE",
      description = "Image files, or directories searched recursively for images.")
  List<Path> inputs;

  @Override
  public Integer call() throws Exception {
    if (batchSize < 1) {
      throw new ConfigException("predict --batch-size must be >= 1, got " + batchSize);
    }
    RamtrainConfig config = common.load(Map.of());
    BackendSpec backendSpec = TrainSettings.backend(config);
    TrainedCheckpoint trained = checkpoint.open();
    List<Path> files = ImageFiles.under(inputs);
    int failed = 0;
    try (PrintWriter csv = writer();
        ImageClassifier classifier =
            ImageClassifier.open(
                trained, backendSpec, config.longValue("ramtrain.etl.max-pixels"), batchSize)) {
      Stream<String> header =
          Stream.concat(
              Stream.of("path", "prediction", "probability"),
              Stream.concat(trained.classes().stream(), Stream.of("error")));
      csv.println(String.join(",", header.map(PredictCommand::field).toList()));
      for (ImageClassifier.Prediction p : classifier.classify(files)) {
        List<String> row = new ArrayList<>();
        row.add(p.path());
        if (p.error() != null) {
          failed++;
          row.add("");
          row.add("");
          trained.classes().forEach(c -> row.add(""));
          row.add(p.error());
        } else {
          row.add(p.label());
          row.add(String.format(Locale.ROOT, "%.6f", p.probability()));
          for (float v : p.probabilities()) {
            row.add(String.format(Locale.ROOT, "%.6f", v));
          }
          row.add("");
        }
        csv.println(String.join(",", row.stream().map(PredictCommand::field).toList()));
      }
    }
    if (output != null) { // the whole CSV is written: publish it under its name in one step
      Files.move(
          partial(), output, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
    if (failed > 0) {
      throw new IOException(
          failed + " of " + files.size() + " images could not be read (see the error column)");
    }
    return 0;
  }

  private PrintWriter writer() throws IOException {
    if (output == null) {
      return new PrintWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8)) {
        @Override
        public void close() {
          flush(); // standard output stays open
        }
      };
    }
    Path parent = output.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    // Written beside the target and renamed when complete: a run that dies midway leaves no
    // truncated CSV under the name a consumer reads.
    return new PrintWriter(Files.newBufferedWriter(partial(), StandardCharsets.UTF_8));
  }

  private Path partial() {
    return output.resolveSibling(output.getFileName() + ".partial");
  }

  /** A CSV field, quoted when it holds a comma, quote or line break (RFC 4180). */
  static String field(String value) {
    if (value.indexOf(',') < 0 && value.indexOf('"') < 0 && value.indexOf('\n') < 0) {
      return value;
    }
    return '"' + value.replace("\"", "\"\"") + '"';
  }
}
