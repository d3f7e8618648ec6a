package dev.ramtrain.jobs.report;

import java.util.List;

/**
 * One chart of a report, drawn interactively in the page and as a PNG: named lines of (x, y)
 * points. {@code logScale}: a log y axis makes sense (positive values); {@code smoothing}: the
 * lines are noisy and get a smoothed companion.
 */
public record Chart(
    String id,
    String title,
    String xLabel,
    String yLabel,
    boolean logScale,
    boolean smoothing,
    List<Series> series) {

  /** A named line; y may hold NaN where a record lacks the value (drawn as a gap). */
  /**
   * A line: {@code run}, the run it belongs to (0 unless several are overlaid), and {@code line},
   * its place among that run's lines (train, val, ...). Several runs: a run is a colour and a line
   * a dash pattern, the same in every chart; one run: a line is a colour.
   */
  public record Series(String label, double[] x, double[] y, int run, int line) {
    public Series(String label, double[] x, double[] y) {
      this(label, x, y, 0, 0);
    }

    /** The palette index of this line's colour in a chart of {@code runs} runs. */
    public int colour(int runs) {
      return runs > 1 ? run : line;
    }
  }

  /** How many runs this chart overlays. */
  public int runs() {
    return series.stream().mapToInt(Series::run).max().orElse(0) + 1;
  }

  public boolean isEmpty() {
    return series.stream().allMatch(s -> s.x().length == 0);
  }
}
