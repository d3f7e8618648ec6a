package dev.ramtrain.jobs.report;

import dev.ramtrain.trainer.EvalResult;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The report of training runs: {@code report/index.html} (interactive, self-contained) and a PNG
 * per chart, drawn from the runs' metrics.jsonl, latest checkpoint and kept final evaluation. Every
 * file is claimed before it is written ({@link FileClaims}): a file there that ramtrain cannot
 * prove it wrote is never replaced.
 */
public final class TrainingReport {
  static final String INDEX = "index.html";
  static final String CONFUSION = "confusion.png";

  private TrainingReport() {}

  /**
   * Asked before each report file is written: refuses a file that is not ramtrain's (throwing), and
   * may record the file as ramtrain's (a run's journal).
   */
  public interface FileClaims {
    void claim(Path file) throws IOException;
  }

  /** Whether a report writes a file of this name into its folder (or stages one). */
  public static boolean writes(String name) {
    String target = AtomicFile.stagedTarget(name).orElse(name);
    return target.equals(INDEX)
        || target.equals(Evaluation.FILE)
        || target.equals(CONFUSION)
        || (target.startsWith("evaluate-") && target.endsWith(".png"))
        || (target.endsWith(".png")
            && RunCharts.IDS.contains(target.substring(0, target.length() - 4)));
  }

  /**
   * At the end of a run: keeps its final evaluation on {@code split} in {@code run}/report and
   * draws the report there; returns index.html.
   */
  public static Path write(
      Path run, String split, EvalResult eval, List<String> classes, FileClaims claims)
      throws IOException {
    Path dir = ownReportFolder(run);
    Files.createDirectories(dir);
    claims.claim(dir.resolve(Evaluation.FILE));
    Evaluation.of(split, eval, classes).write(dir);
    return drawInto(List.of(run), dir, claims);
  }

  /**
   * Draws the report of {@code runs} (one, or several overlaid) into {@code dir}, a folder of its
   * own: index.html and the PNGs. A folder ramtrain cannot prove is a report's is refused (see
   * {@link #requireReportFolder}). Returns index.html.
   */
  public static Path draw(List<Path> runs, Path dir) throws IOException {
    requireReportFolder(dir);
    return drawInto(runs, dir, TrainingReport::requireOwnMark);
  }

  /**
   * Refuses to replace {@code file} unless it carries ramtrain's mark: a PNG's text chunk, a page's
   * generator (the staging files of a report folder proven by its page pass).
   */
  private static void requireOwnMark(Path file) throws IOException {
    String name = file.getFileName().toString();
    if (!Files.exists(file) || AtomicFile.stagedTarget(name).isPresent()) {
      return;
    }
    boolean ours =
        name.endsWith(".png")
            ? AtomicFile.isRamtrainPng(file)
            : Files.readString(file, StandardCharsets.ISO_8859_1).contains(HtmlReport.GENERATOR);
    if (!ours) {
      throw new FileAlreadyExistsException(
          file.toString(), null, "not written by ramtrain: left as it is");
    }
  }

  /** Draws the report of one run into its own report folder, each file claimed first. */
  public static Path redraw(Path run, FileClaims claims) throws IOException {
    return drawInto(List.of(run), ownReportFolder(run), claims);
  }

  /**
   * {@code run}/report, refused where it is a link: its files would be written wherever the link
   * points (a user's folder), which the run's journal cannot vouch for.
   */
  private static Path ownReportFolder(Path run) throws IOException {
    Path dir = run.resolve("report");
    if (Files.isSymbolicLink(dir)) {
      throw new IOException(
          dir
              + " is a link (to "
              + Files.readSymbolicLink(dir)
              + "): ramtrain writes a run's report only into a folder of its own");
    }
    return dir;
  }

  private static Path drawInto(List<Path> runs, Path dir, FileClaims claims) throws IOException {
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
    Path index = dir.resolve(INDEX);
    Files.createDirectories(dir);
    removeStaleStaging(dir, claims);
    List<Chart> charts = RunCharts.of(records);
    for (Chart chart : charts) {
      Path png = dir.resolve(chart.id() + ".png");
      claims.claim(png);
      StaticCharts.write(chart, png);
    }
    Evaluation e = records.get(0).evaluation();
    if (records.size() == 1 && e != null) {
      Path png = dir.resolve(CONFUSION);
      claims.claim(png);
      StaticCharts.confusion(
          png,
          String.format(
              "Confusion matrix, %% of each true class (%s accuracy %.1f%%)",
              e.split(), 100 * e.accuracy()),
          e.classes(),
          e.confusion());
    }
    String html = HtmlReport.render(records, charts);
    claims.claim(index);
    AtomicFile.write(index, out -> out.write(html.getBytes(StandardCharsets.UTF_8)));
    return index;
  }

  /**
   * Deletes the staging files ({@code .NAME.N.tmp}) a killed report left for its own files, each
   * claimed first as the files themselves are.
   */
  private static void removeStaleStaging(Path dir, FileClaims claims) throws IOException {
    List<Path> stale;
    try (Stream<Path> entries = Files.list(dir)) {
      stale =
          entries
              .filter(
                  p -> {
                    Optional<String> target = AtomicFile.stagedTarget(p.getFileName().toString());
                    return target.isPresent() && writes(target.get());
                  })
              .toList();
    }
    for (Path file : stale) {
      claims.claim(file);
      Files.deleteIfExists(file);
    }
  }

  /**
   * Refuses a folder ramtrain cannot prove is a report's, so that no file of the user's (a
   * loss.png, say) is replaced: it must be new or empty, or hold a page ramtrain wrote (its pages
   * name ramtrain as their generator; so did the plain pages of its first versions).
   */
  private static void requireReportFolder(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (var entries = Files.list(dir)) {
      if (entries.findAny().isEmpty()) {
        return;
      }
    }
    Path index = dir.resolve(INDEX);
    String page = Files.exists(index) ? Files.readString(index, StandardCharsets.UTF_8) : "";
    if (!page.contains(HtmlReport.GENERATOR) && !page.contains("<title>ramtrain run report")) {
      throw new FileAlreadyExistsException(
          dir.toString(),
          null,
          "holds files and no ramtrain report: left as it is; choose a new or empty -o folder");
    }
  }
}
