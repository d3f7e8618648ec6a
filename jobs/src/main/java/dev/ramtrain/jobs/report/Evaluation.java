package dev.ramtrain.jobs.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.files.IoErrors;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.EvalResult;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import javax.imageio.ImageIO;

/**
 * A run's final evaluation as its report keeps it (report/evaluation.json), so that {@code ramtrain
 * report} can draw the report again without the model or the data: loss, accuracy, the confusion
 * matrix with its class names, and the most confident mistakes with their images as PNG.
 */
public record Evaluation(
    String split,
    double loss,
    double accuracy,
    long samples,
    List<String> classes,
    long[][] confusion,
    List<Mistake> mistakes) {
  static final String FILE = "evaluation.json";
  private static final ObjectMapper JSON = new ObjectMapper();

  /** A mistake: sample number in the split's order, classes, confidence, image as base64 PNG. */
  public record Mistake(long sample, int truth, int predicted, float confidence, String png) {}

  public static Evaluation of(String split, EvalResult eval, List<String> classes)
      throws IOException {
    List<Mistake> mistakes = new java.util.ArrayList<>();
    for (EvalResult.Mistake m : eval.mistakes()) {
      ImageShape shape = new ImageShape(m.height(), m.width(), m.channels());
      ByteArrayOutputStream png = new ByteArrayOutputStream();
      ImageIO.write(ContactSheet.toImage(m.pixels(), shape), "png", png);
      mistakes.add(
          new Mistake(
              m.sample(),
              m.truth(),
              m.predicted(),
              m.confidence(),
              Base64.getEncoder().encodeToString(png.toByteArray())));
    }
    return new Evaluation(
        split, eval.loss(), eval.accuracy(), eval.samples(), classes, eval.confusion(), mistakes);
  }

  /** Samples of class {@code c}, and the share of them predicted right (NaN for none). */
  public long classSamples(int c) {
    long total = 0;
    for (long n : confusion[c]) {
      total += n;
    }
    return total;
  }

  public double classAccuracy(int c) {
    long total = classSamples(c);
    return total == 0 ? Double.NaN : (double) confusion[c][c] / total;
  }

  /** Writes {@code dir}/evaluation.json whole or not at all. */
  public void write(Path dir) throws IOException {
    AtomicFile.write(dir.resolve(FILE), out -> JSON.writeValue(out, this));
  }

  /** The evaluation kept in {@code dir}, or null when there is none. */
  public static Evaluation read(Path dir) throws IOException {
    Path file = dir.resolve(FILE);
    if (!Files.exists(file)) {
      return null;
    }
    try {
      return JSON.readValue(file.toFile(), Evaluation.class);
    } catch (IOException e) {
      throw new IOException(file + " is not a ramtrain evaluation: " + IoErrors.reason(e), e);
    }
  }
}
