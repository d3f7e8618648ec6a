package dev.ramtrain.jobs.report;

import dev.ramtrain.trainer.EvalResult;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The report of training runs: {@code report/index.html} (interactive, self-contained) and a PNG
 * per chart, drawn from the runs' metrics.jsonl, latest checkpoint and kept final evaluation.
 */
public final class TrainingReport {
  private TrainingReport() {}

  /**
   * At the end of a run: keeps its final evaluation on {@code split} in {@code run}/report and
   * draws the report there; returns index.html.
   */
  public static Path write(Path run, String split, EvalResult eval, List<String> classes)
      throws IOException {
    Path dir = run.resolve("report");
    Files.createDirectories(dir);
    Evaluation.of(split, eval, classes).write(dir);
    return drawInto(List.of(run), dir);
  }

  /**
   * Draws the report of {@code runs} (one, or several overlaid) into {@code dir}: index.html and
   * the PNGs. A page there that ramtrain did not write is never replaced. Returns index.html.
   */
  public static Path draw(List<Path> runs, Path dir) throws IOException {
    requireReportFolder(runs, dir);
    return drawInto(runs, dir);
  }

  private static Path drawInto(List<Path> runs, Path dir) throws IOException {
    List<RunRecord> records = new ArrayList<>();
    Set<String> names = new HashSet<>();
    for (Path run : runs) {
      RunRecord record = RunRecord.read(run);
      // Lines and table rows are named after their run: two runs' folders of one name differ.
      String name = record.name();
      for (int n = 2; !names.add(name); n++) {
        name = record.name() + " (" + n + ")";
      }
      records.add(record.named(name));
    }
    Path index = dir.resolve("index.html");
    Files.createDirectories(dir);
    List<Chart> charts = RunCharts.of(records);
    for (Chart chart : charts) {
      StaticCharts.write(chart, dir.resolve(chart.id() + ".png"));
    }
    Evaluation e = records.get(0).evaluation();
    if (records.size() == 1 && e != null) {
      StaticCharts.confusion(
          dir.resolve("confusion.png"),
          String.format(
              "Confusion matrix, %% of each true class (%s accuracy %.1f%%)",
              e.split(), 100 * e.accuracy()),
          e.classes(),
          e.confusion());
    }
    String html = HtmlReport.render(records, charts);
    AtomicFile.write(index, out -> out.write(html.getBytes(StandardCharsets.UTF_8)));
    return index;
  }

  /**
   * Refuses a folder ramtrain cannot prove is a report's, so that no file of the user's (a
   * loss.png, say) is replaced: it must be new or empty, a run's own report folder, or hold a page
   * ramtrain wrote (its pages name ramtrain as their generator; so did the plain pages of its first
   * versions).
   */
  private static void requireReportFolder(List<Path> runs, Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    Path folder = dir.toAbsolutePath().normalize();
    for (Path run : runs) {
      if (folder.equals(run.toAbsolutePath().normalize().resolve("report"))) {
        return;
      }
    }
    try (var entries = Files.list(dir)) {
      if (entries.findAny().isEmpty()) {
        return;
      }
    }
    Path index = dir.resolve("index.html");
    String page = Files.exists(index) ? Files.readString(index, StandardCharsets.UTF_8) : "";
    if (!page.contains(HtmlReport.GENERATOR) && !page.contains("<title>ramtrain run report")) {
      throw new java.nio.file.FileAlreadyExistsException(
          dir.toString(),
          null,
          "holds files and no ramtrain report: left as it is; choose a new or empty -o folder");
    }
  }
}
