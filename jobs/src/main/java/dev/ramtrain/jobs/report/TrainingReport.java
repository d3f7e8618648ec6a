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
  public static Path write(Path run, Path metricsFile, EvalResult eval, List<String> classes)
      throws IOException {
    Path dir = run.resolve("report");
    Files.createDirectories(dir);
    List<JsonNode> epochs = new ArrayList<>();
    List<JsonNode> steps = new ArrayList<>();
    if (Files.exists(metricsFile)) {
      for (String line : Files.readAllLines(metricsFile, StandardCharsets.UTF_8)) {
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
    List<JsonNode> offloaded = steps.stream().filter(r -> r.has("h2d_bytes")).toList();
    if (!offloaded.isEmpty()) {
      Charts.lines(
          dir.resolve("offload.png"),
          "Offloaded steps: where the time goes (ms)",
          "step",
          List.of(
              series("step", offloaded, "step", "step_ms"),
              series("compute", offloaded, "step", "compute_ms"),
              series("copies in + out", offloaded, "step", "copy_in_ms", "copy_out_ms"),
              series("exposed copies", offloaded, "step", "exposed_copy_ms"),
              series("host optimizer", offloaded, "step", "host_optimizer_ms"),
              series("exposed optimizer", offloaded, "step", "optimizer_exposed_ms")));
    }
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
    if (!offloaded.isEmpty()) {
      html.append(offloadTable(offloaded));
    }
    List<String> pictures =
        new ArrayList<>(List.of("loss.png", "accuracy.png", "step-loss.png", "confusion.png"));
    if (!offloaded.isEmpty()) {
      pictures.add("offload.png");
    }
    for (String png : pictures) {
      html.append("<p><img src=\"").append(png).append("\" alt=\"").append(png).append("\"></p>\n");
    }
    html.append(
        "<p>Raw metrics: <a href=\"../metrics.jsonl\">metrics.jsonl</a></p></body></html>\n");
    Path index = dir.resolve("index.html");
    Files.writeString(index, html.toString());
    return index;
  }

  /** A series of the sum of {@code yKeys} against {@code xKey}. */
  private static Charts.Series series(
      String name, List<JsonNode> records, String xKey, String... yKeys) {
    double[] x = new double[records.size()];
    double[] y = new double[records.size()];
    for (int i = 0; i < records.size(); i++) {
      x[i] = records.get(i).path(xKey).asDouble();
      for (String key : yKeys) {
        y[i] += records.get(i).path(key).asDouble(Double.NaN);
      }
    }
    return new Charts.Series(name, x, y);
  }

  /** Medians over the logged offloaded steps (the first, which loads everything, left out). */
  private static String offloadTable(List<JsonNode> steps) {
    List<JsonNode> steady = steps.size() > 1 ? steps.subList(1, steps.size()) : steps;
    StringBuilder t = new StringBuilder();
    t.append(
        String.format(
            "<h2>Offload</h2>%n<p>Medians over %d logged steps. Exposed: time the compute stream"
                + " waited for weights, or the host optimizer ran on after the last gradient"
                + " landed.</p>%n<table border=\"1\" cellpadding=\"3\">%n",
            steady.size()));
    String[][] rows = {
      {"host to device per step (MiB)", "h2d_bytes", "mib"},
      {"device to host per step (MiB)", "d2h_bytes", "mib"},
      {"copy in (ms)", "copy_in_ms", ""},
      {"copy out (ms)", "copy_out_ms", ""},
      {"compute (ms)", "compute_ms", ""},
      {"exposed copies (ms)", "exposed_copy_ms", ""},
      {"overlap (share of copy time hidden)", "overlap", ""},
      {"host optimizer (ms)", "host_optimizer_ms", ""},
      {"exposed optimizer (ms)", "optimizer_exposed_ms", ""},
      {"step (ms)", "step_ms", ""},
      {"peak device memory (MiB)", "peak_device_bytes", "mib"},
      {"pinned host memory (MiB)", "pinned_host_bytes", "mib"}
    };
    for (String[] row : rows) {
      double[] values =
          steady.stream().mapToDouble(r -> r.path(row[1]).asDouble()).sorted().toArray();
      double median = values[values.length / 2] / (row[2].equals("mib") ? 1 << 20 : 1);
      t.append(String.format("<tr><td>%s</td><td>%.3f</td></tr>%n", row[0], median));
    }
    return t.append("</table>\n").toString();
  }

  private static String escape(String s) {
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
  }
}
