package dev.ramtrain.jobs.report;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/** Small PNG charts drawn with Java2D: line charts of series, and a confusion matrix. */
public final class Charts {
  private static final Color[] PALETTE = {
    new Color(31, 119, 180), new Color(255, 127, 14), new Color(44, 160, 44), new Color(214, 39, 40)
  };
  private static final int W = 640;
  private static final int H = 400;
  private static final int LEFT = 60;
  private static final int RIGHT = 20;
  private static final int TOP = 30;
  private static final int BOTTOM = 45;

  private Charts() {}

  /** One named line: x and y values of the same length. */
  public record Series(String name, double[] x, double[] y) {}

  public static void lines(Path png, String title, String xLabel, List<Series> series)
      throws IOException {
    double minX = Double.POSITIVE_INFINITY, maxX = Double.NEGATIVE_INFINITY;
    double minY = Double.POSITIVE_INFINITY, maxY = Double.NEGATIVE_INFINITY;
    for (Series s : series) {
      for (int i = 0; i < s.x().length; i++) {
        if (Double.isFinite(s.y()[i])) {
          minX = Math.min(minX, s.x()[i]);
          maxX = Math.max(maxX, s.x()[i]);
          minY = Math.min(minY, s.y()[i]);
          maxY = Math.max(maxY, s.y()[i]);
        }
      }
    }
    if (!Double.isFinite(minX)) {
      minX = 0;
      maxX = 1;
      minY = 0;
      maxY = 1;
    }
    if (maxX == minX) {
      maxX = minX + 1;
    }
    double pad = Math.max(1e-9, (maxY - minY) * 0.05);
    minY -= pad;
    maxY += pad;
    BufferedImage image = new BufferedImage(W, H, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = canvas(image, title);
    int plotW = W - LEFT - RIGHT;
    int plotH = H - TOP - BOTTOM;
    g.setColor(new Color(230, 230, 230));
    for (int t = 0; t <= 4; t++) {
      int y = TOP + plotH * t / 4;
      g.drawLine(LEFT, y, LEFT + plotW, y);
      g.setColor(Color.DARK_GRAY);
      g.drawString(String.format("%.3g", maxY - (maxY - minY) * t / 4), 4, y + 4);
      g.setColor(new Color(230, 230, 230));
    }
    g.setColor(Color.DARK_GRAY);
    g.drawRect(LEFT, TOP, plotW, plotH);
    g.drawString(String.format("%.3g", minX), LEFT, H - BOTTOM + 15);
    String maxText = String.format("%.3g", maxX);
    g.drawString(maxText, LEFT + plotW - g.getFontMetrics().stringWidth(maxText), H - BOTTOM + 15);
    g.drawString(xLabel, LEFT + plotW / 2 - g.getFontMetrics().stringWidth(xLabel) / 2, H - 10);
    g.setStroke(new BasicStroke(2f));
    for (int k = 0; k < series.size(); k++) {
      Series s = series.get(k);
      g.setColor(PALETTE[k % PALETTE.length]);
      int px = -1, py = -1;
      for (int i = 0; i < s.x().length; i++) {
        if (!Double.isFinite(s.y()[i])) {
          continue;
        }
        int x = LEFT + (int) Math.round((s.x()[i] - minX) / (maxX - minX) * plotW);
        int y = TOP + (int) Math.round((maxY - s.y()[i]) / (maxY - minY) * plotH);
        if (px >= 0) {
          g.drawLine(px, py, x, y);
        }
        g.fillOval(x - 2, y - 2, 5, 5);
        px = x;
        py = y;
      }
      g.drawString(s.name(), LEFT + 10 + 140 * k, TOP + 15);
    }
    g.dispose();
    Png.write(image, png);
  }

  /** Rows are true classes, columns predictions; cells shaded by the row's share. */
  public static void confusion(Path png, String title, List<String> classes, long[][] counts)
      throws IOException {
    int n = classes.size();
    int cell = Math.max(24, Math.min(60, 480 / Math.max(1, n)));
    int labelW = 110;
    int size = labelW + n * cell + 20;
    BufferedImage image = new BufferedImage(size, 40 + n * cell + 24, BufferedImage.TYPE_INT_RGB);
    Graphics2D g = canvas(image, title);
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 10));
    g.setColor(Color.DARK_GRAY);
    g.drawString("rows: true class; columns: predicted class, same order", 10, 40 + n * cell + 16);
    for (int r = 0; r < n; r++) {
      long total = 0;
      for (long v : counts[r]) {
        total += v;
      }
      g.setColor(Color.DARK_GRAY);
      g.drawString(classes.get(r), 4, 40 + r * cell + cell / 2 + 4);
      for (int c = 0; c < n; c++) {
        double share = total == 0 ? 0 : (double) counts[r][c] / total;
        int shade = (int) Math.round(255 * (1 - share));
        g.setColor(r == c ? new Color(shade, 255, shade) : new Color(255, shade, shade));
        g.fillRect(labelW + c * cell, 40 + r * cell, cell - 1, cell - 1);
        g.setColor(Color.BLACK);
        String text = Long.toString(counts[r][c]);
        g.drawString(
            text,
            labelW + c * cell + (cell - g.getFontMetrics().stringWidth(text)) / 2,
            40 + r * cell + cell / 2 + 4);
      }
    }
    g.dispose();
    Png.write(image, png);
  }

  private static Graphics2D canvas(BufferedImage image, String title) {
    Graphics2D g = image.createGraphics();
    g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
    g.setRenderingHint(
        RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
    g.setColor(Color.WHITE);
    g.fillRect(0, 0, image.getWidth(), image.getHeight());
    g.setColor(Color.BLACK);
    g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 13));
    g.drawString(title, 10, 18);
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
    return g;
  }
}
