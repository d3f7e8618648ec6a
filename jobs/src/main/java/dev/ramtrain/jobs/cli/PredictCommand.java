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
          + "probability, every class's probability (or, with --top-k, the K likeliest classes "
          + "and their probabilities), and an error column for files that cannot be read. "
          + "Images go through the preprocessing's decode and resize (mode "
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
      names = "--top-k",
      paramLabel = "K",
      description =
          "Write the K likeliest classes and their probabilities instead of every class's"
              + " (default: every class up to "
              + ALL_CLASSES_UP_TO
              + " classes, else the top 5).")
  Integer topK;

  @Option(
      names = "--class-names",
      paramLabel = "FILE",
      description =
          "With --weights: the classes' names, one per line in the head's order (as"
              + " ImageNet's class lists); default: their numbers.")
  Path classNames;

  /** Up to this many classes the CSV has every class's probability by default; beyond, top 5. */
  static final int ALL_CLASSES_UP_TO = 20;

  static final int DEFAULT_TOP_K = 5;

  /** The most classes --num-classes may give weights without a head (ImageNet-21k has 21,843). */
  static final int MAX_BARE_CLASSES = 100_000;

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

  @Mixin OffloadFlag offload;

  /** The weights served, their classes numbered, at the input size asked (224×224 by default). */
  private TrainedCheckpoint pretrained() throws IOException {
    PretrainedWeights file = checkpoint.readWeights();
    int classes = numClasses != null ? numClasses : file.classes();
    if (classes < 1) {
      throw new ConfigException(
          "--num-classes: " + checkpoint.weights + " has no classifier head to count classes by");
    }
    if (numClasses != null && file.classes() >= 1 && numClasses != file.classes()) {
      // another count would serve a fresh random head (and 2147483647 of them ran out of memory
      // building their names)
      throw new ConfigException(
          "--num-classes "
              + numClasses
              + ": "
              + checkpoint.weights
              + "'s head has "
              + file.classes()
              + " classes, and predict serves the head it has");
    }
    if (numClasses != null && file.classes() < 1 && numClasses > MAX_BARE_CLASSES) {
      throw new ConfigException(
          "--num-classes " + numClasses + ": at most " + MAX_BARE_CLASSES + " for a bare model");
    }
    String size = image == null ? "224x224" : image;
    ImageShape shape;
    try { // HxW (RGB, as the pretrained models take) or HxWxC
      shape = ImageShape.parse(size.split("x").length == 2 ? size + "x3" : size);
    } catch (IllegalArgumentException e) {
      throw new ConfigException("--image " + size + ": expected HEIGHTxWIDTH, e.g. 224x224");
    }
    return checkpoint.openPretrained(file, classNames(classes), shape);
  }

  /** The --class-names file's lines (as many as the head has classes), or the classes' numbers. */
  private List<String> classNames(int classes) throws IOException {
    if (classNames == null) {
      return java.util.stream.IntStream.range(0, classes).mapToObj(String::valueOf).toList();
    }
    if (!Files.isRegularFile(classNames)) {
      throw new ConfigException("--class-names " + classNames + ": no such file");
    }
    List<String> names;
    try {
      names =
          Files.readAllLines(classNames, StandardCharsets.UTF_8).stream()
              .map(String::strip)
              .filter(line -> !line.isEmpty())
              .toList();
    } catch (java.nio.charset.MalformedInputException e) {
      throw new ConfigException("--class-names " + classNames + ": not UTF-8 text");
    }
    if (names.size() != classes) {
      throw new ConfigException(
          "--class-names "
              + classNames
              + ": "
              + names.size()
              + " names for a head of "
              + classes
              + " classes");
    }
    return names;
  }

  /** The CSV's first fields: an existing -o file that starts so is a CSV ramtrain wrote. */
  static final String HEADER_START = "path,prediction,probability,";

  private ImageClassifier open(BackendSpec backendSpec, RamtrainConfig config) throws IOException {
    return ImageClassifier.open(
        checkpoint.pretrained() ? pretrained() : checkpoint.open(),
        backendSpec,
        EtlSettings.imageLimits(config),
        batchSize,
        TrainSettings.offload(config));
  }

  @Override
  public Integer call() throws Exception {
    if (batchSize < 1) {
      throw new ConfigException("predict --batch-size must be >= 1, got " + batchSize);
    }
    if (topK != null && topK < 1) {
      throw new ConfigException("predict --top-k must be >= 1, got " + topK);
    }
    if (classNames != null && !checkpoint.pretrained()) {
      throw new ConfigException(
          "--class-names goes with --weights: a checkpoint names its classes itself");
    }
    RamtrainConfig config = common.load(offload.settings());
    BackendSpec backendSpec = TrainSettings.backend(config);
    List<Path> files = ImageFiles.under(inputs);
    if (output != null) {
      OutputFile.requireReplaceable(output, "predict -o", files, PredictCommand::isOurCsv);
    }
    int[] failed = {0};
    // The checkpoint is held by the classifier alone, which lets its tensors go once they are on
    // the device (a large model's weights would otherwise stay on the heap while it serves).
    try (ImageClassifier classifier = open(backendSpec, config)) {
      ImageClassifier.releaseHeap();
      TrainedCheckpoint trained = classifier.checkpoint();
      int classes = trained.classes().size();
      int k =
          topK != null
              ? Math.min(topK, classes)
              : classes <= ALL_CLASSES_UP_TO ? classes : DEFAULT_TOP_K;
      boolean every = topK == null && classes <= ALL_CLASSES_UP_TO;
      AtomicFile.Body csv =
          out -> failed[0] = write(trained, classifier, files, every ? 0 : k, out);
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

  /**
   * Writes the CSV, with every class's probability ({@code topK} 0) or the {@code topK} likeliest
   * classes and theirs; returns how many files had an error row.
   */
  private static int write(
      TrainedCheckpoint trained,
      ImageClassifier classifier,
      List<Path> files,
      int topK,
      OutputStream out) {
    PrintWriter csv = new PrintWriter(new OutputStreamWriter(out, StandardCharsets.UTF_8));
    List<String> columns =
        topK == 0
            ? trained.classes()
            : java.util.stream.IntStream.rangeClosed(1, topK)
                .boxed()
                .flatMap(i -> Stream.of("top" + i, "top" + i + "_probability"))
                .toList();
    Stream<String> header =
        Stream.concat(
            Stream.of("path", "prediction", "probability"),
            Stream.concat(columns.stream(), Stream.of("error")));
    csv.println(String.join(",", header.map(PredictCommand::field).toList()));
    int failed = 0;
    for (ImageClassifier.Prediction p : classifier.classify(files)) {
      List<String> row = new ArrayList<>();
      row.add(p.path());
      if (p.error() != null) {
        failed++;
        row.add("");
        row.add("");
        columns.forEach(c -> row.add(""));
        row.add(p.error());
      } else {
        row.add(p.label());
        row.add(probability(p.probability()));
        float[] probabilities = p.probabilities();
        if (topK == 0) {
          for (float v : probabilities) {
            row.add(probability(v));
          }
        } else {
          for (int c : likeliest(probabilities, topK)) {
            row.add(trained.classes().get(c));
            row.add(probability(probabilities[c]));
          }
        }
        row.add("");
      }
      csv.println(String.join(",", row.stream().map(PredictCommand::field).toList()));
    }
    csv.flush();
    return failed;
  }

  private static String probability(float p) {
    return String.format(Locale.ROOT, "%.6f", p);
  }

  /** The {@code k} likeliest classes, likeliest first; equal probabilities by class order. */
  static int[] likeliest(float[] probabilities, int k) {
    return java.util.stream.IntStream.range(0, probabilities.length)
        .boxed()
        .sorted(
            (a, b) -> {
              int byProbability = Float.compare(probabilities[b], probabilities[a]);
              return byProbability != 0 ? byProbability : Integer.compare(a, b);
            })
        .limit(k)
        .mapToInt(Integer::intValue)
        .toArray();
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
