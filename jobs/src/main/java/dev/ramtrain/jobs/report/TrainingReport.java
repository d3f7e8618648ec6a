package dev.ramtrain.jobs.report;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.trainer.EvalResult;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The report of a training run, from its metrics.jsonl and final evaluation: loss and accuracy
 * curves, the step loss, the confusion matrix (PNG each), and an index.html linking them.
 */
public final class TrainingReport {
  private static final ObjectMapper JSON = new ObjectMapper();

  private TrainingReport() {}

  /** Writes {@code report/} under the run directory; returns index.html. */
  public static Path write(Path run, List<Path> metricsFiles, EvalResult eval, List<String> classes)
      throws IOException {
    Path dir = run.resolve("report");
    Files.createDirectories(dir);
    List<JsonNode> epochs = new ArrayList<>();
    List<JsonNode> steps = new ArrayList<>();
    for (Path file : metricsFiles) {
      if (!Files.exists(file)) {
        continue;
      }
      for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
        JsonNode record = JSON.readTree(line);
        (record.path("type").asText().equals("epoch") ? epochs : steps).add(record);
      }
    }
    Charts.lines(
        dir.resolve("loss.png"),
        "Loss per epoch",
        "epoch",
        List.of(
            series("train", epochs, "epoch", "train_loss"),
            series("val", epochs, "epoch", "val_loss")));
    Charts.lines(
        dir.resolve("accuracy.png"),
        "Accuracy per epoch",
        "epoch",
        List.of(
            series("train", epochs, "epoch", "train_acc"),
            series("val", epochs, "epoch", "val_acc")));
    Charts.lines(
        dir.resolve("step-loss.png"),
        "Training loss by step",
        "step",
        List.of(series("batch loss", steps, "step", "loss")));
    Charts.confusion(
        dir.resolve("confusion.png"),
        String.format("Confusion matrix (val accuracy %.4f)", eval.accuracy()),
        classes,
        eval.confusion());
    StringBuilder html = new StringBuilder();
    html.append(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>ramtrain run report</title></head><body>\n");
    html.append("<h1>ramtrain run report</h1>\n");
    html.append(
        String.format(
            "<p>Validation accuracy %.4f, loss %.4f over %d samples.</p>%n",
            eval.accuracy(), eval.loss(), eval.samples()));
    html.append("<table border=\"1\" cellpadding=\"3\"><tr><th>class</th><th>accuracy</th></tr>\n");
    for (int c = 0; c < classes.size(); c++) {
      html.append(
          String.format(
              "<tr><td>%s</td><td>%.4f</td></tr>%n",
              escape(classes.get(c)), eval.classAccuracy(c)));
    }
    html.append("</table>\n");
    for (String png : List.of("loss.png", "accuracy.png", "step-loss.png", "confusion.png")) {
      html.append("<p><img src=\"").append(png).append("\" alt=\"").append(png).append("\"></p>\n");
    }
    html.append(
        "<p>Raw metrics: <a href=\"../metrics.jsonl\">metrics.jsonl</a></p></body></html>\n");
    Path index = dir.resolve("index.html");
    Files.writeString(index, html.toString());
    return index;
  }

  private static Charts.Series series(
      String name, List<JsonNode> records, String xKey, String yKey) {
    double[] x = new double[records.size()];
    double[] y = new double[records.size()];
    for (int i = 0; i < records.size(); i++) {
      x[i] = records.get(i).path(xKey).asDouble();
      y[i] = records.get(i).path(yKey).asDouble(Double.NaN);
    }
    return new Charts.Series(name, x, y);
  }

  private static String escape(String s) {
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
  }
}
