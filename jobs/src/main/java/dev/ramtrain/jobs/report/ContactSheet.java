package dev.ramtrain.jobs.report;

import dev.ramtrain.format.ImageShape;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.awt.image.DataBufferByte;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/** A PNG grid of samples, each captioned with its class name. */
public final class ContactSheet {
  private static final int CAPTION = 14;

  private ContactSheet() {}

  public static void write(
      List<DatasetReport.Sample> samples, ImageShape shape, List<String> classes, Path png)
      throws IOException {
    AtomicFile.png(draw(samples, shape, classes), png);
  }

  /** The sheet as an image: upscaled tiles in a square grid, each captioned with its class. */
  public static BufferedImage draw(
      List<DatasetReport.Sample> samples, ImageShape shape, List<String> classes)
      throws IOException {
    if (samples.isEmpty()) {
      throw new IOException("no samples to draw");
    }
    int columns = (int) Math.ceil(Math.sqrt(samples.size()));
    int rows = (samples.size() + columns - 1) / columns;
    int scale = Math.max(1, 96 / Math.max(shape.height(), shape.width()));
    int tileW = shape.width() * scale;
    int tileH = shape.height() * scale;
    int pad = 4;
    BufferedImage sheet =
        new BufferedImage(
            columns * (tileW + pad) + pad,
            rows * (tileH + CAPTION + pad) + pad,
            BufferedImage.TYPE_3BYTE_BGR);
    Graphics2D g = sheet.createGraphics();
    g.setColor(new Color(32, 32, 32));
    g.fillRect(0, 0, sheet.getWidth(), sheet.getHeight());
    g.setRenderingHint(
        RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
    g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
    for (int i = 0; i < samples.size(); i++) {
      int x = pad + (i % columns) * (tileW + pad);
      int y = pad + (i / columns) * (tileH + CAPTION + pad);
      DatasetReport.Sample s = samples.get(i);
      g.drawImage(toImage(s.pixels(), shape), x, y, tileW, tileH, null);
      g.setColor(Color.WHITE);
      String name =
          s.label() < classes.size() ? classes.get(s.label()) : Integer.toString(s.label());
      g.drawString(name, x, y + tileH + CAPTION - 3);
    }
    g.dispose();
    return sheet;
  }

  /** HWC RGB (or grey) bytes to a BufferedImage. */
  static BufferedImage toImage(byte[] hwc, ImageShape shape) {
    if (shape.channels() == 1) {
      BufferedImage grey =
          new BufferedImage(shape.width(), shape.height(), BufferedImage.TYPE_BYTE_GRAY);
      System.arraycopy(
          hwc, 0, ((DataBufferByte) grey.getRaster().getDataBuffer()).getData(), 0, hwc.length);
      return grey;
    }
    BufferedImage image =
        new BufferedImage(shape.width(), shape.height(), BufferedImage.TYPE_3BYTE_BGR);
    byte[] bgr = ((DataBufferByte) image.getRaster().getDataBuffer()).getData();
    for (int p = 0; p < hwc.length; p += 3) {
      bgr[p] = hwc[p + 2];
      bgr[p + 1] = hwc[p + 1];
      bgr[p + 2] = hwc[p];
    }
    return image;
  }
}
