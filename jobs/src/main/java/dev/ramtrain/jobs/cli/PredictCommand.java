package dev.ramtrain.jobs.cli;

import dev.ramtrain.console.Printable;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.report.AtomicFile;
import dev.ramtrain.jobs.train.ImageClassifier;
import dev.ramtrain.jobs.train.ImageFiles;
import dev.ramtrain.jobs.train.TrainSettings;
import dev.ramtrain.jobs.train.TrainedCheckpoint;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.checkpoint.PretrainedWeights;
import java.io.IOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
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
    header = "Classify images with a checkpoint or weights, as CSV.",
    description = {
      "Classify image files with a checkpoint; writes CSV: path, predicted class, its "
          + "probability, every class's probability, and an error column for files that "
          + "cannot be read. Images go through the preprocessing's decode and resize (mode "
          + "and decoder recorded in the checkpoint) and the training run's normalization, so "
          + "serving sees what training saw.",
      "Runs in this process, on the driver: --master does not distribute it."
    })
public final class PredictCommand implements Callable<Integer> {
  @Mixin CommonFlags common;

  @Mixin CheckpointFlags checkpoint;

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

  @Option(
      names = "--num-classes",
      description =
          "With --weights: the classifier's outputs (default: the weights' own head's);"
              + " predictions name classes by number.")
  Integer numClasses;

  @Option(
      names = "--image",
      paramLabel = "HxW",
      description =
          "With --weights: the input size (default 224x224, the named models' pretraining size).")
  String image;

  @Parameters(
      arity = "1..*",
      paramLabel = "IMAGE",
      description = "Image files, or directories searched recursively for images.")
  List<Path> inputs;

  /** The weights served, their classes numbered, at the input size asked (224×224 by default). */
  private TrainedCheckpoint pretrained() throws IOException {
    PretrainedWeights file = checkpoint.readWeights();
    int classes = numClasses != null ? numClasses : file.classes();
    if (classes < 1) {
      throw new ConfigException(
          "--num-classes: " + checkpoint.weights + " has no classifier head to count classes by");
    }
    String size = image == null ? "224x224" : image;
    ImageShape shape;
    try { // HxW (RGB, as the pretrained models take) or HxWxC
      shape = ImageShape.parse(size.split("x").length == 2 ? size + "x3" : size);
    } catch (IllegalArgumentException e) {
      throw new ConfigException("--image " + size + ": expected HEIGHTxWIDTH, e.g. 224x224");
    }
    List<String> names =
        java.util.stream.IntStream.range(0, classes).mapToObj(String::valueOf).toList();
    return checkpoint.openPretrained(file, names, shape);
  }

  /** The CSV's first fields: an existing -o file that starts so is a CSV ramtrain wrote. */
  static final String HEADER_START = "path,prediction,probability,";

  @Override
  public Integer call() throws Exception {
    if (batchSize < 1) {
      throw new ConfigException("predict --batch-size must be >= 1, got " + batchSize);
    }
    RamtrainConfig config = common.load(Map.of());
    BackendSpec backendSpec = TrainSettings.backend(config);
    TrainedCheckpoint trained = checkpoint.pretrained() ? pretrained() : checkpoint.open();
    List<Path> files = ImageFiles.under(inputs);
    if (output != null) {
      OutputFile.requireReplaceable(output, "predict -o", files, PredictCommand::isOurCsv);
    }
    int[] failed = {0};
    try (ImageClassifier classifier =
        ImageClassifier.open(trained, backendSpec, EtlSettings.imageLimits(config), batchSize)) {
      AtomicFile.Body csv = out -> failed[0] = write(trained, classifier, files, out);
      if (output == null) {
        csv.writeTo(System.out);
        System.out.flush();
      } else { // written beside and renamed when whole: no truncated CSV under its name
        AtomicFile.write(output, csv);
      }
    }
    if (failed[0] > 0) {
      throw new IOException(
          failed[0] + " of " + files.size() + " images could not be read (see the error column)");
    }
    return 0;
  }

  /** Writes the CSV; returns how many files had an error row. */
  private static int write(
      TrainedCheckpoint trained, ImageClassifier classifier, List<Path> files, OutputStream out) {
    PrintWriter csv = new PrintWriter(new OutputStreamWriter(out, StandardCharsets.UTF_8));
    Stream<String> header =
        Stream.concat(
            Stream.of("path", "prediction", "probability"),
            Stream.concat(trained.classes().stream(), Stream.of("error")));
    csv.println(String.join(",", header.map(PredictCommand::field).toList()));
    int failed = 0;
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
    csv.flush();
    return failed;
  }

  private static boolean isOurCsv(Path file) throws IOException {
    try (var reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
      String first = reader.readLine();
      return first != null && first.startsWith(HEADER_START);
    } catch (java.nio.charset.MalformedInputException e) {
      return false; // not text: not a CSV of ramtrain's
    }
  }

  /**
   * A CSV field: control characters made visible ({@link Printable}), a leading {@code = + - @}
   * that a spreadsheet would run as a formula made text by a quote before it (OWASP's advice),
   * quoted when it holds a comma or a quote (RFC 4180). Paths and class names come from the user's
   * files: a file named {@code =HYPERLINK(...).jpg} must not become a formula in someone's sheet.
   */
  static String field(String value) {
    String safe = Printable.of(value);
    if (!safe.isEmpty() && "=+-@".indexOf(safe.charAt(0)) >= 0) {
      safe = "'" + safe;
    }
    if (safe.indexOf(',') < 0 && safe.indexOf('"') < 0) {
      return safe;
    }
    return '"' + safe.replace("\"", "\"\"") + '"';
  }
}
