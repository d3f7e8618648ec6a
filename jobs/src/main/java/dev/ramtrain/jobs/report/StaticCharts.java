package dev.ramtrain.jobs.report;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.HeatMapChart;
import org.knowm.xchart.HeatMapChartBuilder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.lines.SeriesLines;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * The report's charts as PNGs, drawn by XChart (for a README, a notebook cell, a CI artefact): the
 * same {@link Chart}s as the page, and the confusion matrix as a labelled heat map.
 */
public final class StaticCharts {
  private static final int WIDTH = 800;
  private static final int HEIGHT = 450;

  /** The smoothing the page starts with, so that both show the same curve. */
  private static final double SMOOTHING = 0.6;

  /** The page's palette (report.js), so a line has one colour in both. */
  private static final Color[] PALETTE = {
    new Color(0x1f77b4), new Color(0xff7f0e), new Color(0x2ca02c), new Color(0xd62728),
    new Color(0x9467bd), new Color(0x8c564b), new Color(0xe377c2), new Color(0x7f7f7f),
    new Color(0xbcbd22), new Color(0x17becf)
  };

  /** Overlaid runs: a run is a colour in every chart, its lines (train, val) differ by dash. */
  private static final BasicStroke[] DASHES = {
    SeriesLines.SOLID,
    new BasicStroke(2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {8, 4}, 0),
    new BasicStroke(2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {2, 3}, 0),
    new BasicStroke(
        2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {8, 3, 2, 3}, 0)
  };

  private StaticCharts() {}

  public static void write(Chart chart, Path png) throws IOException {
    XYChart xy =
        new XYChartBuilder()
            .width(WIDTH)
            .height(HEIGHT)
            .title(chart.title())
            .xAxisTitle(chart.xLabel())
            .yAxisTitle(chart.yLabel())
            .build();
    xy.getStyler().setDefaultSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Line);
    xy.getStyler().setLegendPosition(Styler.LegendPosition.InsideNE);
    xy.getStyler().setChartBackgroundColor(Color.WHITE);
    xy.getStyler().setXAxisDecimalPattern("#,##0.##");
    int runs = chart.runs();
    for (Chart.Series s : chart.series()) {
      Color color = PALETTE[s.colour(runs) % PALETTE.length];
      BasicStroke dash = DASHES[(runs > 1 ? s.line() : 0) % DASHES.length];
      if (chart.smoothing()) { // the raw line faint behind the smoothed one, as on the page
        line(
            xy,
            s.label() + " (raw)",
            s.x(),
            s.y(),
            new Color(color.getRGB() & 0x00ffffff | 0x50000000, true),
            dash);
        line(
            xy,
            s.label() + " (smoothed " + SMOOTHING + ")",
            s.x(),
            smooth(s.y(), SMOOTHING),
            color,
            dash);
      } else {
        line(xy, s.label(), s.x(), s.y(), color, dash);
      }
    }
    AtomicFile.png(BitmapEncoder.getBufferedImage(xy), png);
  }

  private static void line(
      XYChart xy, String label, double[] xs, double[] ys, Color color, BasicStroke dash) {
    List<Double> x = new ArrayList<>();
    List<Double> y = new ArrayList<>();
    for (int i = 0; i < xs.length; i++) {
      if (Double.isFinite(ys[i])) { // XChart draws no gaps: a point without value is left out
        x.add(xs[i]);
        y.add(ys[i]);
      }
    }
    if (x.isEmpty()) {
      return;
    }
    XYSeries line = xy.addSeries(label, x, y);
    line.setLineColor(color);
    line.setLineStyle(dash);
    line.setMarkerColor(color);
    line.setMarker(x.size() <= 60 ? SeriesMarkers.CIRCLE : SeriesMarkers.NONE);
  }

  /** Debiased exponential moving average (as report.js draws it); NaN points stay NaN. */
  static double[] smooth(double[] ys, double weight) {
    double[] out = new double[ys.length];
    double last = 0;
    int count = 0;
    for (int i = 0; i < ys.length; i++) {
      if (!Double.isFinite(ys[i])) {
        out[i] = Double.NaN;
        continue;
      }
      last = last * weight + (1 - weight) * ys[i];
      count++;
      out[i] = last / (1 - Math.pow(weight, count));
    }
    return out;
  }

  /**
   * Rows (y, top to bottom) are true classes, columns (x) predicted ones; each cell shows and is
   * shaded by its share of the row, in percent (the page has the counts beside).
   */
  public static void confusion(Path png, String title, List<String> classes, long[][] counts)
      throws IOException {
    AtomicFile.png(confusionImage(title, classes, counts), png);
  }

  /** The confusion matrix drawn, as {@link #confusion} writes it. */
  public static java.awt.image.BufferedImage confusionImage(
      String title, List<String> classes, long[][] counts) {
    int n = classes.size();
    int size = Math.max(420, Math.min(1400, 160 + 56 * n));
    HeatMapChart chart =
        new HeatMapChartBuilder()
            .width(size + 260)
            .height(size)
            .title(title)
            .xAxisTitle("predicted class")
            .yAxisTitle("true class")
            .build();
    chart.getStyler().setShowValue(true);
    chart.getStyler().setHeatMapValueDecimalPattern("0.0");
    chart.getStyler().setChartBackgroundColor(Color.WHITE);
    chart.getStyler().setRangeColors(new Color[] {Color.WHITE, new Color(31, 119, 180)});
    chart.getStyler().setMin(0);
    chart.getStyler().setMax(100);
    chart.getStyler().setLegendVisible(false);
    chart.getStyler().setXAxisLabelRotation(n > 6 ? 45 : 0);
    List<String> rowsTopDown = new ArrayList<>(classes);
    java.util.Collections.reverse(rowsTopDown); // XChart's first row is the bottom one
    List<Number[]> cells = new ArrayList<>();
    for (int t = 0; t < n; t++) {
      long total = 0;
      for (long v : counts[t]) {
        total += v;
      }
      for (int p = 0; p < n; p++) {
        double share = total == 0 ? 0 : 100.0 * counts[t][p] / total;
        cells.add(new Number[] {p, n - 1 - t, share});
      }
    }
    chart.addSeries("counts", classes, rowsTopDown, cells);
    return BitmapEncoder.getBufferedImage(chart);
  }
}
