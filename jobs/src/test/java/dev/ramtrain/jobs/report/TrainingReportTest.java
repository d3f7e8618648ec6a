package dev.ramtrain.jobs.report;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.jobs.train.RunJournal;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What the report page and its PNGs hold, from a run directory written by {@link RunFixture}. */
class TrainingReportTest {
  @TempDir Path tmp;

  /** The charts' data as the page carries it (the JSON in #report-data). */
  static JsonNode chartData(String html) throws IOException {
    Matcher m =
        Pattern.compile(
                "<script type=\"application/json\" id=\"report-data\">(.*?)</script>",
                Pattern.DOTALL)
            .matcher(html);
    assertTrue(m.find(), "the page carries its data");
    return new ObjectMapper().readTree(m.group(1).replace("<\\/", "</"));
  }

  static JsonNode chart(JsonNode data, String id) {
    for (JsonNode c : data.get("charts")) {
      if (c.get("id").asText().equals(id)) {
        return c;
      }
    }
    return null;
  }

  @Test
  void oneRunGetsEverySectionAndEveryStepsLoss() throws Exception {
    Path run = RunFixture.write(tmp.resolve("run"), 3, 0.01, true);
    Path index = TrainingReport.redraw(run, RunJournal.of(run)::claim);
    String html = Files.readString(index);

    assertFalse(html.contains("src=\"http") || html.contains("href=\"http"), "self-contained");
    assertTrue(html.contains("uPlot"), "uPlot is inlined");
    for (String section :
        List.of(
            "Per-class accuracy",
            "Confusion matrix (counts)",
            "Confusion matrix, row-normalized",
            "predicted →",
            "true ↓",
            "Most confident mistakes",
            "Epochs and timing",
            "Offload",
            "Dataset",
            "Run settings",
            "Build")) {
      assertTrue(html.contains(section), section);
    }
    assertEquals(3, count(html, "<img alt=\"sample "), "one image per kept mistake");
    assertTrue(html.contains("<b>2</b><span>best epoch (checkpoints/best)"), "the best epoch");
    assertEquals(1, count(html, "<tr class=\"changed\"><td>2</td>"), "its row highlighted");
    assertTrue(html.contains("cat → <b>dog</b>"), "mistakes name true and predicted class");
    // Row-normalized: 'dog' has 20 samples, 15 right = 75.0 %; counts table shows 15.
    assertTrue(html.contains(">75.0</td>") && html.contains(">15</td>"), "counts and shares");

    // Settings: the two that differ from the defaults come first, with their defaults beside.
    int epochsRow = html.indexOf("<td class=\"key\">ramtrain.train.epochs</td>");
    int seedRow = html.indexOf("<td class=\"key\">ramtrain.seed</td>");
    assertTrue(epochsRow > 0 && seedRow > epochsRow, "changed settings first");
    assertTrue(html.contains("2 of 3 settings differ"), "counted against the defaults");
    assertTrue(
        html.substring(epochsRow, html.indexOf("</tr>", epochsRow)).contains(">5</td>"),
        "the default of epochs is shown beside the run's value");

    JsonNode data = chartData(html);
    JsonNode stepLoss = chart(data, "step-loss").get("series").get(0);
    int steps = 3 * RunFixture.STEPS_PER_EPOCH;
    assertEquals(steps, stepLoss.get("x").size(), "every step, not one in log-every");
    for (int s = 0; s < steps; s++) {
      assertEquals(s, stepLoss.get("x").get(s).asInt());
      assertEquals(RunFixture.loss(s, 0.01), stepLoss.get("y").get(s).asDouble(), 1e-12);
    }
    assertTrue(chart(data, "step-loss").get("smoothing").asBoolean());
    List<String> ids = new ArrayList<>();
    data.get("charts").forEach(c -> ids.add(c.get("id").asText()));
    assertEquals(
        List.of(
            "step-loss",
            "loss",
            "accuracy",
            "lr",
            "throughput",
            "data-stall",
            "offload",
            "copied",
            "memory"),
        ids);
    for (String id : ids) {
      BufferedImage png = ImageIO.read(run.resolve("report/" + id + ".png").toFile());
      assertNotNull(png, id);
      assertEquals(800, png.getWidth(), id);
    }
    assertNotNull(ImageIO.read(run.resolve("report/confusion.png").toFile()));
  }

  @Test
  void aResidentRunHasNoOffloadCharts() throws Exception {
    Path run = RunFixture.write(tmp.resolve("run"), 1, 0.01, false);
    String html = Files.readString(TrainingReport.redraw(run, RunJournal.of(run)::claim));
    assertEquals(null, chart(chartData(html), "offload"));
    assertFalse(html.contains("<h2>Offload</h2>"));
  }

  /** A run with --ema: the average's validation curves beside the weights', and its columns. */
  @Test
  void aRunWithAnAverageShowsItsCurvesAndColumns() throws Exception {
    Path run = RunFixture.write(tmp.resolve("run"), 3, 0.01, false);
    ObjectMapper json = new ObjectMapper();
    StringBuilder metrics = new StringBuilder();
    for (String line : Files.readAllLines(run.resolve("metrics.jsonl"))) {
      var record = (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(line);
      if (record.path("type").asText().equals("epoch")) {
        record.put("val_loss_ema", 0.25 * record.path("epoch").asInt());
        record.put("val_acc_ema", 0.3);
      }
      metrics.append(json.writeValueAsString(record)).append('\n');
    }
    Files.writeString(run.resolve("metrics.jsonl"), metrics);
    String html = Files.readString(TrainingReport.redraw(run, RunJournal.of(run)::claim));
    assertTrue(html.contains("<th>val loss (EMA)</th><th>val acc (EMA)</th>"), html);
    assertTrue(html.contains("<td>0.7500</td><td>0.3000</td></tr>"), html);
    JsonNode loss = chart(chartData(html), "loss").get("series");
    assertEquals("val (EMA)", loss.get(2).get("label").asText());
    assertEquals(0.5, loss.get(2).get("y").get(1).asDouble(), 1e-12);
    JsonNode accuracy = chart(chartData(html), "accuracy").get("series");
    assertEquals("val (EMA)", accuracy.get(2).get("label").asText());
    String plain =
        Files.readString(
            TrainingReport.redraw(
                RunFixture.write(tmp.resolve("plain"), 1, 0.01, false),
                RunJournal.of(tmp.resolve("plain"))::claim));
    assertFalse(plain.contains("(EMA)"), "no average, no column");
  }

  @Test
  void severalRunsAreOverlaidWithTheSettingsThatDiffer() throws Exception {
    Path a = RunFixture.write(tmp.resolve("lr-small"), 2, 0.01, false);
    Path b = RunFixture.write(tmp.resolve("lr-large"), 3, 0.05, false);
    String html = Files.readString(TrainingReport.draw(List.of(a, b), tmp.resolve("compare")));
    assertTrue(html.contains("Settings that differ"));
    int lrRow = html.indexOf("<td class=\"key\">ramtrain.train.lr</td>");
    assertTrue(lrRow > 0, "lr differs");
    String row = html.substring(lrRow, html.indexOf("</tr>", lrRow));
    assertTrue(row.contains(">0.01</td>") && row.contains(">0.05</td>"), row);
    assertFalse(html.contains("<td class=\"key\">ramtrain.seed</td>"), "equal settings left out");
    JsonNode loss = chart(chartData(html), "step-loss").get("series");
    assertEquals(2, loss.size());
    assertEquals("lr-small: loss", loss.get(0).get("label").asText());
    assertEquals(2 * RunFixture.STEPS_PER_EPOCH, loss.get(0).get("x").size());
    assertEquals(3 * RunFixture.STEPS_PER_EPOCH, loss.get(1).get("x").size());
    assertFalse(html.contains("Most confident mistakes"), "per-run sections stay in each run");
    // A run is one colour in every chart, its lines told apart by their dash.
    for (JsonNode c : chartData(html).get("charts")) {
      java.util.Map<Integer, java.util.List<Integer>> dashes = new java.util.TreeMap<>();
      for (JsonNode s : c.get("series")) {
        String label = s.get("label").asText();
        int run = label.startsWith("lr-small:") ? 0 : 1;
        assertEquals(run, s.get("colour").asInt(), label);
        dashes.computeIfAbsent(run, r -> new java.util.ArrayList<>()).add(s.get("dashed").asInt());
      }
      for (var lines : dashes.values()) {
        assertEquals(
            lines.size(), new java.util.HashSet<>(lines).size(), c.get("id") + " " + lines);
      }
    }
  }

  @Test
  void aPageRamtrainDidNotWriteIsLeftAlone() throws Exception {
    Path run = RunFixture.write(tmp.resolve("run"), 1, 0.01, false);
    Path out = Files.createDirectories(tmp.resolve("site"));
    Files.writeString(out.resolve("index.html"), "<html>my own page</html>");
    assertThrows(FileAlreadyExistsException.class, () -> TrainingReport.draw(List.of(run), out));
    assertEquals("<html>my own page</html>", Files.readString(out.resolve("index.html")));
    try (var files = Files.list(out)) {
      assertEquals(1, files.count(), "nothing written beside it");
    }
    // Nor is a folder of other files without a page: its loss.png is not ramtrain's.
    Path pictures = Files.createDirectories(tmp.resolve("pictures"));
    Files.writeString(pictures.resolve("loss.png"), "my picture");
    assertThrows(
        FileAlreadyExistsException.class, () -> TrainingReport.draw(List.of(run), pictures));
    assertEquals("my picture", Files.readString(pictures.resolve("loss.png")));
    // A run's own report folder, and a folder holding a report ramtrain wrote, are redrawn.
    TrainingReport.redraw(run, RunJournal.of(run)::claim);
    TrainingReport.redraw(run, RunJournal.of(run)::claim);
    Path compare = tmp.resolve("compare");
    TrainingReport.draw(List.of(run, run), compare);
    TrainingReport.draw(List.of(run, run), compare);
    assertTrue(AtomicFile.isRamtrainPng(compare.resolve("loss.png")), "its PNGs carry the mark");
    // Within them, a file of a report's name that ramtrain did not write is left alone: in the
    // run's folder it is not in the run's journal, in another it has no ramtrain mark.
    Files.writeString(compare.resolve("lr.png"), "my picture");
    assertThrows(
        FileAlreadyExistsException.class, () -> TrainingReport.draw(List.of(run, run), compare));
    assertEquals("my picture", Files.readString(compare.resolve("lr.png")));
    Path own = run.resolve("report/loss.png");
    Files.delete(own);
    RunJournal.of(run).forget(java.util.Set.of("report/loss.png"));
    Files.writeString(own, "my picture");
    assertThrows(
        FileAlreadyExistsException.class,
        () -> TrainingReport.redraw(run, RunJournal.of(run)::claim));
    assertEquals("my picture", Files.readString(own));
  }

  /** A run's report/ replaced by a link to a user's folder is not written through. */
  @Test
  void aReportFolderThatIsALinkIsNotWrittenThrough() throws Exception {
    Path run = RunFixture.write(tmp.resolve("linked"), 1, 0.01, false);
    Path mine = Files.createDirectories(tmp.resolve("my-folder"));
    Path report = run.resolve("report");
    if (Files.exists(report)) {
      try (var files = Files.walk(report)) {
        files.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
      }
    }
    Files.createSymbolicLink(report, mine);
    IOException e =
        assertThrows(
            IOException.class, () -> TrainingReport.redraw(run, RunJournal.of(run)::claim));
    assertTrue(e.getMessage().contains("is a link"), e.getMessage());
    try (var inside = Files.list(mine)) {
      assertEquals(0, inside.count(), "nothing written into the linked folder");
    }
  }

  /**
   * A damaged line is named with its number and nothing is written; the half-written last line a
   * killed run leaves (no newline after it) is passed over, as train --resume passes over it.
   */
  @Test
  void aDamagedMetricsFileIsNamedWithItsLine() throws Exception {
    Path run = RunFixture.write(tmp.resolve("run"), 1, 0.01, false);
    Path metrics = run.resolve("metrics.jsonl");
    String whole = Files.readString(metrics);
    Files.writeString(metrics, whole + "{\"type\":\"epoch\"}\n{\"type\":");
    TrainingReport.draw(List.of(run), tmp.resolve("torn"));
    assertTrue(Files.exists(tmp.resolve("torn/index.html")), "a torn last line is passed over");
    Files.writeString(metrics, whole + "{\"type\":\n{\"type\":\"epoch\"}\n");
    IOException e =
        assertThrows(IOException.class, () -> TrainingReport.draw(List.of(run), tmp.resolve("o")));
    assertTrue(e.getMessage().contains("metrics.jsonl line"), e.getMessage());
    assertFalse(Files.exists(tmp.resolve("o")), "nothing written for a run it cannot read");
  }

  /** The staging files a killed report left beside its own files go with the next draw. */
  @Test
  void aKilledReportsStagingFilesAreRemovedByTheNext() throws Exception {
    Path run = RunFixture.write(tmp.resolve("run"), 1, 0.01, false);
    TrainingReport.redraw(run, RunJournal.of(run)::claim);
    Path left = Files.writeString(run.resolve("report/.loss.png.123456.tmp"), "half a PNG");
    Path mine = Files.writeString(run.resolve("report/.notes.txt.1.tmp"), "not a report file");
    TrainingReport.redraw(run, RunJournal.of(run)::claim);
    assertFalse(Files.exists(left), "the report's own staging file is gone");
    assertTrue(Files.exists(mine), "another file is left alone");
    Path compare = tmp.resolve("compare");
    TrainingReport.draw(List.of(run, run), compare);
    Path there = Files.writeString(compare.resolve(".index.html.77.tmp"), "<html");
    TrainingReport.draw(List.of(run, run), compare);
    assertFalse(Files.exists(there));
  }

  /**
   * Counters no run writes (a step of 1e300 made the chart library compute ticks forever) are
   * refused naming the line, at once.
   */
  @Test
  @org.junit.jupiter.api.Timeout(30)
  void anAbsurdCounterInATamperedMetricsFileIsNamed() throws Exception {
    for (String tamper :
        List.of(
            "{\"type\":\"step\",\"step\":1e300,\"loss\":0.5}",
            "{\"type\":\"epoch\",\"epoch\":-1,\"step\":3}",
            "{\"type\":\"step\",\"step\":9223372036854775807}",
            "{\"type\":\"step\",\"step\":2,\"step_losses_from\":0.5,\"step_losses\":[1]}")) {
      Path run =
          RunFixture.write(tmp.resolve("run-" + Math.abs(tamper.hashCode())), 1, 0.01, false);
      int lines = Files.readAllLines(run.resolve("metrics.jsonl")).size();
      Files.writeString(
          run.resolve("metrics.jsonl"), tamper + "\n", java.nio.file.StandardOpenOption.APPEND);
      IOException e =
          assertThrows(IOException.class, () -> TrainingReport.redraw(run, file -> {}), tamper);
      assertTrue(
          e.getMessage().contains("metrics.jsonl line " + (lines + 1) + ": "), e.getMessage());
    }
  }

  private static int count(String text, String part) {
    int n = 0;
    for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + 1)) {
      n++;
    }
    return n;
  }
}
