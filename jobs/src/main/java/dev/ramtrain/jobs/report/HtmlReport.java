package dev.ramtrain.jobs.report;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ramtrain.jobs.config.RamtrainConfig;
import java.io.IOException;
import java.io.InputStream;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The report page: one self-contained HTML file (uPlot, its stylesheet, the charts' data and the
 * mistakes' images inlined; it opens offline, from a file or in a notebook). One run gets every
 * section; several runs get their charts overlaid, a summary row each and the settings that differ
 * between them.
 */
public final class HtmlReport {
  /** A sample's decode and crop time in the loader, where it decodes or crops at all. */
  private static String loaderTimes(JsonNode r) {
    double decode = r.path("loader_decode_ms").asDouble();
    double crop = r.path("loader_resize_ms").asDouble();
    if (decode > 0) {
      return String.format(" (decode %.3f ms, crop %.3f ms)", decode, crop);
    }
    return crop > 0 ? String.format(" (crop %.3f ms)", crop) : "";
  }

  /** Marks a page as ramtrain's: only such a page is replaced by a later report. */
  static final String GENERATOR = "<meta name=\"generator\" content=\"ramtrain report\">";

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String ASSETS = "/dev/ramtrain/jobs/report/assets.properties";

  private HtmlReport() {}

  public static String render(List<RunRecord> runs, List<Chart> charts) throws IOException {
    StringBuilder h = new StringBuilder();
    RunRecord first = runs.get(0);
    String title =
        runs.size() == 1 ? "ramtrain run report: " + first.name() : runs.size() + " ramtrain runs";
    h.append("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
        .append(GENERATOR)
        .append("\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        .append("<title>")
        .append(esc(title))
        .append("</title>\n<style>\n")
        .append(uplot("dist/uPlot.min.css"))
        .append(resource("report.css"))
        .append("</style>\n</head><body>\n<h1>")
        .append(esc(title))
        .append("</h1>\n");
    if (runs.size() == 1) {
      single(h, first);
    } else {
      overlay(h, runs);
    }
    h.append("<h2>Charts</h2>\n<p class=\"sub\">Drag to zoom, double-click to reset; the legend")
        .append(" shows the values under the cursor.</p>\n<div id=\"charts\"></div>\n");
    if (runs.size() == 1) {
      afterCharts(h, first);
    }
    h.append("<footer>Raw metrics: ");
    for (RunRecord run : runs) {
      h.append("<code>").append(esc(run.dir().resolve(RunRecord.METRICS).toString()));
      h.append("</code> ");
    }
    h.append("</footer>\n<script type=\"application/json\" id=\"report-data\">")
        .append(scriptSafe(chartData(charts)))
        .append("</script>\n<script>\n")
        .append(uplot("dist/uPlot.iife.min.js"))
        .append("\n</script>\n<script>\n")
        .append(resource("report.js"))
        .append("</script>\n</body></html>\n");
    return h.toString();
  }

  private static void single(StringBuilder h, RunRecord run) {
    JsonNode state = run.state();
    h.append("<p class=\"sub\">").append(esc(run.dir().toAbsolutePath().toString()));
    if (state != null) {
      h.append(" · model <code>").append(esc(state.path("model").asText())).append("</code>");
    }
    h.append("</p>\n<div class=\"cards\">\n");
    Evaluation e = run.evaluation();
    if (e != null) {
      card(h, String.format("%.2f%%", 100 * e.accuracy()), e.split() + " accuracy");
      card(h, String.format("%.4f", e.loss()), e.split() + " loss");
    }
    List<JsonNode> epochs = run.epochs();
    card(h, Integer.toString(epochs.size()), "epochs");
    if (!epochs.isEmpty()) {
      card(h, String.format("%,d", epochs.get(epochs.size() - 1).path("step").asLong()), "steps");
    }
    int bestEpoch = bestEpoch(run);
    if (bestEpoch > 0) {
      card(h, Integer.toString(bestEpoch), "best epoch (checkpoints/best)");
    }
    double seconds = epochs.stream().mapToDouble(r -> r.path("seconds").asDouble()).sum();
    if (seconds > 0) {
      card(h, duration(seconds), "training time");
    }
    if (state != null && state.has("parameters")) {
      card(h, String.format("%,d", state.path("parameters").asLong()), "parameters");
    }
    h.append("</div>\n");
  }

  private static void afterCharts(StringBuilder h, RunRecord run) {
    Evaluation e = run.evaluation();
    if (e != null) {
      classAccuracy(h, e);
      confusion(h, e, false);
      confusion(h, e, true);
      mistakes(h, e);
    } else {
      h.append("<h2>Evaluation</h2>\n<p>No final evaluation is kept for this run (it did not")
          .append(" finish): see <code>ramtrain evaluate</code>.</p>\n");
    }
    timing(h, run);
    List<JsonNode> offloaded = run.stepsWith("h2d_bytes");
    if (!offloaded.isEmpty()) {
      h.append(OffloadTable.html(offloaded));
    }
    dataset(h, run);
    settings(h, run);
  }

  private static void classAccuracy(StringBuilder h, Evaluation e) {
    h.append("<h2>Per-class accuracy (")
        .append(esc(e.split()))
        .append(String.format(", %,d samples)</h2>\n", e.samples()))
        .append(
            "<table><tr><th class=\"key\">class</th><th>samples</th><th>correct</th>"
                + "<th>accuracy</th><th></th></tr>\n");
    for (int c = 0; c < e.classes().size(); c++) {
      double acc = e.classAccuracy(c);
      h.append("<tr><td class=\"key\">")
          .append(esc(e.classes().get(c)))
          .append(
              String.format(
                  "</td><td>%,d</td><td>%,d</td>", e.classSamples(c), e.confusion()[c][c]))
          .append(
              Double.isNaN(acc)
                  ? "<td>–</td><td></td>"
                  : String.format(
                      "<td>%.2f%%</td><td><span class=\"bar\" style=\"width:%dpx\"></span></td>",
                      100 * acc, Math.round(120 * acc)))
          .append("</tr>\n");
    }
    h.append("</table>\n");
  }

  /** Rows: true class; columns: predicted class; both labelled. */
  private static void confusion(StringBuilder h, Evaluation e, boolean normalized) {
    List<String> classes = e.classes();
    h.append(
            normalized
                ? "<h2>Confusion matrix, row-normalized (% of each true class)</h2>\n"
                : "<h2>Confusion matrix (counts)</h2>\n")
        .append("<table class=\"confusion\"><tr><th class=\"axis\"></th><th class=\"axis\"")
        .append(" colspan=\"")
        .append(classes.size())
        .append("\">predicted →</th></tr>\n<tr><th class=\"axis\">true ↓</th>");
    for (String c : classes) {
      h.append("<th>").append(esc(c)).append("</th>");
    }
    h.append("</tr>\n");
    for (int t = 0; t < classes.size(); t++) {
      long total = e.classSamples(t);
      h.append("<tr><th>").append(esc(classes.get(t))).append("</th>");
      for (int p = 0; p < classes.size(); p++) {
        long n = e.confusion()[t][p];
        double share = total == 0 ? 0 : (double) n / total;
        String color = t == p ? "44,160,44" : "214,39,40";
        h.append(
                String.format(
                    "<td style=\"background:rgba(%s,%.3f)\">", color, Math.min(0.85, share)))
            .append(normalized ? String.format("%.1f", 100 * share) : String.format("%,d", n))
            .append("</td>");
      }
      h.append("</tr>\n");
    }
    h.append("</table>\n");
  }

  private static void mistakes(StringBuilder h, Evaluation e) {
    h.append("<h2>Most confident mistakes</h2>\n");
    if (e.mistakes().isEmpty()) {
      h.append("<p>None: every sample was classified right.</p>\n");
      return;
    }
    h.append("<p class=\"sub\">The ")
        .append(e.mistakes().size())
        .append(" misclassified ")
        .append(esc(e.split()))
        .append(" samples the model was surest of, as the trainer saw them.</p>\n")
        .append("<div class=\"mistakes\">\n");
    for (Evaluation.Mistake m : e.mistakes()) {
      String truth = e.classes().get(m.truth());
      String predicted = e.classes().get(m.predicted());
      h.append("<figure><img alt=\"sample ")
          .append(m.sample())
          .append("\" src=\"data:image/png;base64,")
          .append(m.png())
          .append("\"><figcaption>")
          .append(esc(truth))
          .append(" → <b>")
          .append(esc(predicted))
          .append(
              String.format(
                  "</b><br>p = %.3f · #%d</figcaption></figure>\n", m.confidence(), m.sample()));
    }
    h.append("</div>\n");
  }

  private static void timing(StringBuilder h, RunRecord run) {
    if (run.epochs().isEmpty()) {
      return;
    }
    h.append("<h2>Epochs and timing</h2>\n<p class=\"sub\">The best epoch by the run's")
        .append(" best-metric is highlighted.</p>\n<table><tr><th>epoch</th><th>seconds</th>")
        .append("<th>samples/s</th><th>data stall</th><th>loader samples/s</th>")
        .append("<th>train loss</th><th>train acc</th>")
        .append("<th>val loss</th><th>val acc</th>");
    boolean ema = run.epochs().stream().anyMatch(r -> r.has("val_loss_ema"));
    h.append(ema ? "<th>val loss (EMA)</th><th>val acc (EMA)</th></tr>\n" : "</tr>\n");
    int bestEpoch = bestEpoch(run);
    for (JsonNode r : run.epochs()) {
      h.append(r.path("epoch").asInt() == bestEpoch ? "<tr class=\"changed\">" : "<tr>");
      h.append(
          String.format(
              "<td>%d</td><td>%s</td><td>%,.0f</td><td>%.1f%%</td><td>%s</td><td>%.4f</td>"
                  + "<td>%.4f</td><td>%.4f</td><td>%.4f</td>",
              r.path("epoch").asInt(),
              r.has("seconds") ? String.format("%.1f", r.path("seconds").asDouble()) : "–",
              r.path("samples_per_s").asDouble(),
              r.path("data_stall_pct").asDouble(),
              r.has("loader_samples_per_s") // runs from before it was recorded have none
                  ? String.format(
                      "%,.0f%s", r.path("loader_samples_per_s").asDouble(), loaderTimes(r))
                  : "–",
              r.path("train_loss").asDouble(),
              r.path("train_acc").asDouble(),
              r.path("val_loss").asDouble(),
              r.path("val_acc").asDouble()));
      if (ema) {
        h.append(
            r.has("val_loss_ema")
                ? String.format(
                    "<td>%.4f</td><td>%.4f</td>",
                    r.path("val_loss_ema").asDouble(), r.path("val_acc_ema").asDouble())
                : "<td>–</td><td>–</td>");
      }
      h.append("</tr>\n");
    }
    h.append("</table>\n");
  }

  /** The best epoch the last epoch record names (0: none, or a run from before it was kept). */
  private static int bestEpoch(RunRecord run) {
    List<JsonNode> epochs = run.epochs();
    return epochs.isEmpty() ? 0 : epochs.get(epochs.size() - 1).path("best_epoch").asInt();
  }

  private static void dataset(StringBuilder h, RunRecord run) {
    JsonNode s = run.state();
    if (s == null) {
      return;
    }
    Map<String, String> rows = new LinkedHashMap<>();
    rows.put("source", s.path("dataset").asText());
    JsonNode image = s.path("image");
    if (image.size() == 3) {
      rows.put(
          "image (height × width × channels)",
          image.get(0).asInt() + " × " + image.get(1).asInt() + " × " + image.get(2).asInt());
    }
    List<String> classes = new ArrayList<>();
    s.path("classes").forEach(c -> classes.add(c.asText()));
    rows.put("classes", classes.size() + ": " + String.join(", ", classes));
    if (s.has("train_samples")) {
      rows.put("train samples (per epoch)", String.format("%,d", s.path("train_samples").asLong()));
      rows.put("val samples", String.format("%,d", s.path("val_samples").asLong()));
    }
    rows.put("resize", s.path("resize").asText());
    rows.put("decoder", s.path("decoder").asText());
    rows.put("normalization mean", s.path("mean").toString());
    rows.put("normalization std", s.path("std").toString());
    rows.put("data fingerprint", s.path("data_fingerprint").asText());
    h.append("<h2>Dataset</h2>\n<table>\n");
    rows.forEach(
        (k, v) ->
            h.append("<tr><th class=\"key\">")
                .append(esc(k))
                .append("</th><td class=\"key\">")
                .append(esc(v))
                .append("</td></tr>\n"));
    h.append("</table>\n");
  }

  /** Every resolved setting, those that differ from ramtrain's defaults first (highlighted). */
  private static void settings(StringBuilder h, RunRecord run) {
    JsonNode s = run.state();
    if (s == null) {
      h.append("<h2>Run settings</h2>\n<p>No checkpoint: the settings are not known.</p>\n");
      return;
    }
    Map<String, String> used = settingsOf(s);
    SortedMap<String, String> defaults = RamtrainConfig.flat(RamtrainConfig.defaults());
    List<String> changed = new ArrayList<>();
    List<String> same = new ArrayList<>();
    for (String key : used.keySet()) {
      (used.get(key).equals(defaults.get(key)) ? same : changed).add(key);
    }
    h.append("<h2>Run settings</h2>\n<p class=\"sub\">")
        .append(changed.size())
        .append(" of ")
        .append(used.size())
        .append(" settings differ from the defaults (conf/ramtrain-defaults.conf); they come")
        .append(
            " first.</p>\n<table><tr><th class=\"key\">setting</th><th class=\"key\">value</th>")
        .append("<th class=\"key\">default</th></tr>\n");
    for (String key : changed) {
      settingRow(h, "changed", key, used.get(key), defaults.getOrDefault(key, "(none)"));
    }
    for (String key : same) {
      settingRow(h, "", key, used.get(key), "");
    }
    h.append("</table>\n");
    JsonNode build = s.path("build");
    if (!build.isMissingNode()) {
      h.append("<h2>Build</h2>\n<table>\n");
      for (Iterator<Map.Entry<String, JsonNode>> it = build.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> f = it.next();
        h.append("<tr><th class=\"key\">")
            .append(esc(f.getKey()))
            .append("</th><td class=\"key\">")
            .append(esc(f.getValue().asText()))
            .append("</td></tr>\n");
      }
      h.append("</table>\n");
    }
  }

  /** The full resolved configuration when the checkpoint has it, else the resume settings. */
  private static Map<String, String> settingsOf(JsonNode state) {
    JsonNode config = state.has("config") ? state.get("config") : state.path("settings");
    Map<String, String> used = new TreeMap<>();
    config.fields().forEachRemaining(f -> used.put(f.getKey(), f.getValue().asText()));
    return used;
  }

  private static void settingRow(StringBuilder h, String cls, String key, String v, String def) {
    h.append("<tr class=\"")
        .append(cls)
        .append("\"><td class=\"key\">")
        .append(esc(key))
        .append("</td><td class=\"key\">")
        .append(esc(v))
        .append("</td><td class=\"key\">")
        .append(esc(def))
        .append("</td></tr>\n");
  }

  private static void overlay(StringBuilder h, List<RunRecord> runs) {
    h.append("<h2>Runs</h2>\n<table><tr><th class=\"key\">run</th><th>val accuracy</th>")
        .append("<th>val loss</th><th>epochs</th><th>training time</th><th>samples/s</th>")
        .append("<th class=\"key\">model</th></tr>\n");
    for (RunRecord run : runs) {
      Evaluation e = run.evaluation();
      double seconds = run.epochs().stream().mapToDouble(r -> r.path("seconds").asDouble()).sum();
      double rate =
          run.epochs().stream()
              .mapToDouble(r -> r.path("samples_per_s").asDouble())
              .average()
              .orElse(Double.NaN);
      h.append("<tr><td class=\"key\">")
          .append(esc(run.name()))
          .append("</td>")
          .append(
              e == null
                  ? "<td>–</td><td>–</td>"
                  : String.format("<td>%.2f%%</td><td>%.4f</td>", 100 * e.accuracy(), e.loss()))
          .append(
              String.format(
                  "<td>%d</td><td>%s</td><td>%,.0f</td>",
                  run.epochs().size(), seconds > 0 ? duration(seconds) : "–", rate))
          .append("<td class=\"key\">")
          .append(esc(run.state() == null ? "" : run.state().path("model").asText()))
          .append("</td></tr>\n");
    }
    h.append("</table>\n");
    List<Map<String, String>> settings = new ArrayList<>();
    SortedSet<String> keys = new TreeSet<>();
    for (RunRecord run : runs) {
      Map<String, String> s = run.state() == null ? Map.of() : settingsOf(run.state());
      settings.add(s);
      keys.addAll(s.keySet());
    }
    h.append("<h2>Settings that differ</h2>\n<table><tr><th class=\"key\">setting</th>");
    for (RunRecord run : runs) {
      h.append("<th class=\"key\">").append(esc(run.name())).append("</th>");
    }
    h.append("</tr>\n");
    int differing = 0;
    for (String key : keys) {
      if (settings.stream().map(s -> s.getOrDefault(key, "")).distinct().count() < 2) {
        continue;
      }
      differing++;
      h.append("<tr><td class=\"key\">").append(esc(key)).append("</td>");
      for (Map<String, String> s : settings) {
        h.append("<td class=\"key\">").append(esc(s.getOrDefault(key, "–"))).append("</td>");
      }
      h.append("</tr>\n");
    }
    h.append("</table>\n");
    if (differing == 0) {
      h.append("<p>None: the runs were trained with the same settings.</p>\n");
    }
  }

  private static void card(StringBuilder h, String value, String label) {
    h.append("<div class=\"card\"><b>")
        .append(esc(value))
        .append("</b><span>")
        .append(esc(label))
        .append("</span></div>\n");
  }

  static String duration(double seconds) {
    long s = Math.round(seconds);
    return s < 60
        ? String.format("%.1f s", seconds)
        : String.format("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  }

  /** The charts as JSON for report.js; a NaN (a value a record lacks) becomes null, a gap. */
  private static String chartData(List<Chart> charts) throws IOException {
    ObjectNode root = JSON.createObjectNode();
    ArrayNode list = root.putArray("charts");
    for (Chart c : charts) {
      ObjectNode o = list.addObject();
      o.put("id", c.id()).put("title", c.title()).put("xLabel", c.xLabel());
      o.put("yLabel", c.yLabel()).put("logScale", c.logScale()).put("smoothing", c.smoothing());
      ArrayNode series = o.putArray("series");
      int runs = c.runs();
      for (Chart.Series s : c.series()) {
        ObjectNode so = series.addObject();
        so.put("label", s.label());
        so.put("colour", s.colour(runs)); // a run's colour, the same in every chart
        so.put("dashed", runs > 1 ? s.line() : 0); // its lines told apart by their dash
        ArrayNode x = so.putArray("x");
        ArrayNode y = so.putArray("y");
        for (int i = 0; i < s.x().length; i++) {
          x.add(s.x()[i]);
          if (Double.isFinite(s.y()[i])) {
            y.add(s.y()[i]);
          } else {
            y.addNull();
          }
        }
      }
    }
    return JSON.writeValueAsString(root);
  }

  private static String uplot(String file) throws IOException {
    Properties assets = new Properties();
    assets.load(new StringReader(read(ASSETS)));
    return read(
        "/META-INF/resources/webjars/uplot/" + assets.getProperty("uplot.version") + "/" + file);
  }

  private static String resource(String name) throws IOException {
    return read("/dev/ramtrain/jobs/report/" + name);
  }

  private static String read(String resource) throws IOException {
    try (InputStream in = HtmlReport.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IOException("missing from the class path: " + resource);
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  /**
   * JSON made safe inside a script element: run and class names come from folder names, and a "<"
   * in them ("</script>", or "<!--" with "<script" after it, which keeps the element open past its
   * end) would end or swallow the data. Every {@code < > &} becomes its JSON escape, so the
   * browser's HTML parser never sees one and JSON.parse gives the same strings back.
   */
  static String scriptSafe(String json) {
    return json.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026");
  }

  static String esc(String s) {
    return s.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\"", "&quot;");
  }
}
