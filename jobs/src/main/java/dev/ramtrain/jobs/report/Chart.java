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
  public record Series(String label, double[] x, double[] y) {}

  public boolean isEmpty() {
    return series.stream().allMatch(s -> s.x().length == 0);
  }
}
