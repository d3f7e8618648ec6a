package dev.ramtrain.jobs.cli;

import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageProcessor;
import dev.ramtrain.etl.image.ImageTransform;
import dev.ramtrain.etl.image.RejectedImageException;
import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.jobs.config.ConfigException;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.config.TrainSettings;
import dev.ramtrain.jobs.train.TrainedCheckpoint;
import dev.ramtrain.trainer.Predictor;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.Backends;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
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
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import org.apache.arrow.memory.util.MemoryUtil;
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
  private static final Set<String> IMAGE_EXTENSIONS =
      Set.of("jpg", "jpeg", "png", "bmp", "gif", "webp", "tif", "tiff");

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
    List<Path> files = imageFiles(inputs);
    ImageProcessor processor =
        new ImageProcessor(
            new ImageTransform(trained.shape(), trained.resize(), Augmentation.NONE),
            trained.decoder(),
            config.longValue("ramtrain.etl.max-pixels"),
            0);
    int failed = 0;
    try (PrintWriter csv = writer();
        Backend backend = Backends.open(backendSpec)) {
      Stream<String> header =
          Stream.concat(
              Stream.of("path", "prediction", "probability"),
              Stream.concat(trained.classes().stream(), Stream.of("error")));
      csv.println(String.join(",", header.map(PredictCommand::field).toList()));
      dev.ramtrain.trainer.backend.Stream stream = backend.createStream("predict");
      try (Model model =
              Model.build(
                  trained.model(),
                  ModelSpec.parse(trained.model(), trained.shape()),
                  backend,
                  stream,
                  batchSize,
                  0);
          Predictor predictor =
              new Predictor(
                  backend,
                  stream,
                  model,
                  trained.shape(),
                  trained.normalization().mean(),
                  trained.normalization().std())) {
        Checkpoints.restore(trained.loaded(), model, null, backend, stream);
        for (int from = 0; from < files.size(); from += batchSize) {
          List<Path> chunk = files.subList(from, Math.min(files.size(), from + batchSize));
          failed += predict(chunk, processor, predictor, trained.classes(), csv);
        }
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

  /** Classifies one batch of files, writing a row per file; returns how many failed. */
  private static int predict(
      List<Path> chunk,
      ImageProcessor processor,
      Predictor predictor,
      List<String> classes,
      PrintWriter csv) {
    HostBuffer staging = predictor.staging();
    long imageBytes = processor.shape().bytes();
    String[] errors = new String[chunk.size()];
    int[] slot = new int[chunk.size()];
    int staged = 0;
    for (int i = 0; i < chunk.size(); i++) {
      Path file = chunk.get(i);
      long at = staging.address() + staged * imageBytes;
      try {
        byte[] bytes = Files.readAllBytes(file);
        processor.process(
            RawSample.encoded(file.toString(), bytes, -1, null),
            0,
            (copy, pixels) -> MemoryUtil.copyMemory(pixels, at, imageBytes));
        slot[i] = staged++;
      } catch (RejectedImageException e) {
        errors[i] = e.reason().name().toLowerCase(Locale.ROOT) + ": " + e.getMessage();
      } catch (IOException e) {
        errors[i] = "unreadable: " + e.getMessage();
      }
    }
    float[][] p = staged == 0 ? new float[0][] : predictor.probabilities(staged);
    int failed = 0;
    for (int i = 0; i < chunk.size(); i++) {
      List<String> row = new ArrayList<>();
      row.add(chunk.get(i).toString());
      if (errors[i] != null) {
        failed++;
        row.add("");
        row.add("");
        classes.forEach(c -> row.add(""));
        row.add(errors[i]);
      } else {
        float[] probs = p[slot[i]];
        int best = 0;
        for (int c = 1; c < probs.length; c++) {
          best = probs[c] > probs[best] ? c : best;
        }
        row.add(classes.get(best));
        row.add(String.format(Locale.ROOT, "%.6f", probs[best]));
        for (float v : probs) {
          row.add(String.format(Locale.ROOT, "%.6f", v));
        }
        row.add("");
      }
      csv.println(String.join(",", row.stream().map(PredictCommand::field).toList()));
    }
    return failed;
  }

  /** Files named directly, and image files found under named directories, each sorted. */
  static List<Path> imageFiles(List<Path> inputs) throws IOException {
    List<Path> files = new ArrayList<>();
    for (Path input : inputs) {
      if (Files.isDirectory(input)) {
        try (Stream<Path> walk = Files.walk(input)) {
          walk.filter(Files::isRegularFile)
              .filter(PredictCommand::looksLikeImage)
              .sorted()
              .forEach(files::add);
        }
      } else if (Files.exists(input)) {
        files.add(input);
      } else {
        throw new IOException(input + " does not exist");
      }
    }
    if (files.isEmpty()) {
      throw new IOException("no image files under " + inputs);
    }
    return files;
  }

  private static boolean looksLikeImage(Path p) {
    String name = p.getFileName().toString();
    int dot = name.lastIndexOf('.');
    return dot > 0 && IMAGE_EXTENSIONS.contains(name.substring(dot + 1).toLowerCase(Locale.ROOT));
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
