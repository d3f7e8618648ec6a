package dev.ramtrain.etl.source;

import dev.ramtrain.random.Seeds;
import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.GradientPaint;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.Shape;
import java.awt.geom.AffineTransform;
import java.awt.geom.Area;
import java.awt.geom.Ellipse2D;
import java.awt.geom.Path2D;
import java.awt.geom.Rectangle2D;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import javax.imageio.IIOImage;
import javax.imageio.ImageIO;
import javax.imageio.ImageWriteParam;
import javax.imageio.ImageWriter;
import javax.imageio.stream.MemoryCacheImageOutputStream;

/**
 * The generated dataset of the demo and the tests: one shape class per folder (circle, square,
 * triangle, star, cross, ring, ...) drawn at random colour, size, position and rotation over
 * textured backgrounds with clutter, saved as JPEG or PNG in an image-folder layout. Each image is
 * seeded by (seed, class, index), so the same settings give the same files.
 */
public final class SyntheticImages {
  public static final List<String> SHAPES =
      List.of("circle", "square", "triangle", "star", "cross", "ring", "hexagon", "arrow");

  private final int classes;
  private final int perClass;
  private final int width;
  private final int height;
  private final double jpegFraction;
  private final long seed;

  public SyntheticImages(
      int classes, int perClass, int width, int height, double jpegFraction, long seed) {
    if (classes < 2 || classes > SHAPES.size()) {
      throw new IllegalArgumentException(
          "classes must be in [2, " + SHAPES.size() + "], got " + classes);
    }
    if (perClass < 1 || width < 16 || height < 16) {
      throw new IllegalArgumentException("need images-per-class >= 1 and a size of at least 16x16");
    }
    if (jpegFraction < 0 || jpegFraction > 1) {
      throw new IllegalArgumentException("jpeg-fraction must be in [0, 1]");
    }
    this.classes = classes;
    this.perClass = perClass;
    this.width = width;
    this.height = height;
    this.jpegFraction = jpegFraction;
    this.seed = seed;
  }

  /**
   * Whether {@code file} (under {@code root}) has the name and place of a file {@link #writeTo}
   * writes.
   */
  public static boolean isGenerated(Path root, Path file) {
    Path relative = root.relativize(file);
    return relative.getNameCount() == 2
        && SHAPES.contains(relative.getName(0).toString())
        && relative.getName(1).toString().matches("img_\\d{5}\\.(jpg|png)");
  }

  /**
   * Writes {@code root/<shape>/img_NNNNN.{jpg,png}}, never over an existing file; returns the
   * number of files.
   */
  public int writeTo(Path root) throws IOException {
    for (int c = 0; c < classes; c++) {
      Files.createDirectories(root.resolve(SHAPES.get(c)));
    }
    try {
      IntStream.range(0, classes * perClass)
          .parallel()
          .forEach(
              n -> {
                int c = n / perClass;
                int i = n % perClass;
                SplittableRandom rng = new SplittableRandom(Seeds.mix(seed, c, i));
                boolean jpeg = rng.nextDouble() < jpegFraction;
                byte[] bytes = encode(draw(c, rng), jpeg, rng);
                Path file =
                    root.resolve(SHAPES.get(c))
                        .resolve(String.format("img_%05d.%s", i, jpeg ? "jpg" : "png"));
                try {
                  Files.write(file, bytes, StandardOpenOption.CREATE_NEW);
                } catch (IOException e) {
                  throw new UncheckedIOException(e);
                }
              });
    } catch (UncheckedIOException e) {
      throw e.getCause();
    }
    return classes * perClass;
  }

  /** Draws one image of class {@code shapeClass}. */
  BufferedImage draw(int shapeClass, SplittableRandom rng) {
    BufferedImage image = new BufferedImage(width, height, BufferedImage.TYPE_3BYTE_BGR);
    Graphics2D g = image.createGraphics();
    g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
    background(g, rng);
    clutter(g, rng);
    double size = Math.min(width, height) * (0.30 + 0.30 * rng.nextDouble());
    double cx = width * (0.25 + 0.5 * rng.nextDouble());
    double cy = height * (0.25 + 0.5 * rng.nextDouble());
    AffineTransform placement = new AffineTransform();
    placement.translate(cx, cy);
    placement.rotate(rng.nextDouble() * 2 * Math.PI);
    placement.scale(size / 2, size / 2);
    Shape shape = placement.createTransformedShape(unitShape(shapeClass));
    g.setColor(randomColor(rng, 0.55, 1.0));
    g.fill(shape);
    g.setColor(randomColor(rng, 0.0, 0.35));
    g.setStroke(new BasicStroke((float) (1 + rng.nextDouble() * 2)));
    g.draw(shape);
    g.dispose();
    return image;
  }

  private void background(Graphics2D g, SplittableRandom rng) {
    float x1 = (float) (rng.nextDouble() * width);
    float y1 = (float) (rng.nextDouble() * height);
    g.setPaint(
        new GradientPaint(
            x1,
            y1,
            randomColor(rng, 0.2, 0.8),
            width - x1,
            height - y1,
            randomColor(rng, 0.2, 0.8)));
    g.fillRect(0, 0, width, height);
    int texture = rng.nextInt(3);
    Color ink =
        new Color(rng.nextInt(256), rng.nextInt(256), rng.nextInt(256), 40 + rng.nextInt(50));
    g.setColor(ink);
    if (texture == 0) { // stripes
      int step = 3 + rng.nextInt(6);
      AffineTransform saved = g.getTransform();
      g.rotate(rng.nextDouble() * Math.PI, width / 2.0, height / 2.0);
      for (int x = -width; x < 2 * width; x += 2 * step) {
        g.fillRect(x, -height, step, 3 * height);
      }
      g.setTransform(saved);
    } else if (texture == 1) { // speckle
      for (int n = 0; n < width * height / 12; n++) {
        g.fillRect(rng.nextInt(width), rng.nextInt(height), 1 + rng.nextInt(2), 1 + rng.nextInt(2));
      }
    } else { // checker
      int cell = 4 + rng.nextInt(8);
      for (int y = 0; y < height; y += cell) {
        for (int x = (y / cell % 2) * cell; x < width; x += 2 * cell) {
          g.fillRect(x, y, cell, cell);
        }
      }
    }
  }

  /** Small random lines and blobs, so the class shape is not the only thing in the picture. */
  private void clutter(Graphics2D g, SplittableRandom rng) {
    int n = 2 + rng.nextInt(4);
    for (int i = 0; i < n; i++) {
      g.setColor(randomColor(rng, 0.2, 1.0));
      g.setStroke(new BasicStroke((float) (1 + rng.nextDouble() * 2)));
      int x = rng.nextInt(width);
      int y = rng.nextInt(height);
      if (rng.nextBoolean()) {
        g.drawLine(
            x, y, x + rng.nextInt(width / 3) - width / 6, y + rng.nextInt(height / 3) - height / 6);
      } else {
        int r = 2 + rng.nextInt(Math.max(3, Math.min(width, height) / 12));
        g.fillOval(x - r, y - r, 2 * r, 2 * r);
      }
    }
  }

  /** The class shape inside the unit circle. */
  private static Shape unitShape(int shapeClass) {
    return switch (SHAPES.get(shapeClass)) {
      case "circle" -> new Ellipse2D.Double(-1, -1, 2, 2);
      case "square" -> new Rectangle2D.Double(-0.75, -0.75, 1.5, 1.5);
      case "triangle" -> polygon(3, 1.0, 0);
      case "star" -> star();
      case "cross" -> {
        Area cross = new Area(new Rectangle2D.Double(-1, -0.3, 2, 0.6));
        cross.add(new Area(new Rectangle2D.Double(-0.3, -1, 0.6, 2)));
        yield cross;
      }
      case "ring" -> {
        Area ring = new Area(new Ellipse2D.Double(-1, -1, 2, 2));
        ring.subtract(new Area(new Ellipse2D.Double(-0.55, -0.55, 1.1, 1.1)));
        yield ring;
      }
      case "hexagon" -> polygon(6, 1.0, 0);
      case "arrow" -> {
        Path2D.Double arrow = new Path2D.Double();
        arrow.moveTo(-1, -0.25);
        arrow.lineTo(0.2, -0.25);
        arrow.lineTo(0.2, -0.7);
        arrow.lineTo(1, 0);
        arrow.lineTo(0.2, 0.7);
        arrow.lineTo(0.2, 0.25);
        arrow.lineTo(-1, 0.25);
        arrow.closePath();
        yield arrow;
      }
      default -> throw new IllegalArgumentException("no shape " + shapeClass);
    };
  }

  private static Shape polygon(int corners, double radius, double phase) {
    Path2D.Double p = new Path2D.Double();
    for (int k = 0; k < corners; k++) {
      double a = phase + 2 * Math.PI * k / corners - Math.PI / 2;
      if (k == 0) {
        p.moveTo(radius * Math.cos(a), radius * Math.sin(a));
      } else {
        p.lineTo(radius * Math.cos(a), radius * Math.sin(a));
      }
    }
    p.closePath();
    return p;
  }

  private static Shape star() {
    Path2D.Double p = new Path2D.Double();
    for (int k = 0; k < 10; k++) {
      double r = k % 2 == 0 ? 1.0 : 0.42;
      double a = Math.PI * k / 5 - Math.PI / 2;
      if (k == 0) {
        p.moveTo(r * Math.cos(a), r * Math.sin(a));
      } else {
        p.lineTo(r * Math.cos(a), r * Math.sin(a));
      }
    }
    p.closePath();
    return p;
  }

  private static Color randomColor(
      SplittableRandom rng, double minBrightness, double maxBrightness) {
    float hue = (float) rng.nextDouble();
    float saturation = (float) (0.3 + 0.7 * rng.nextDouble());
    float brightness = (float) (minBrightness + (maxBrightness - minBrightness) * rng.nextDouble());
    return Color.getHSBColor(hue, saturation, brightness);
  }

  private static byte[] encode(BufferedImage image, boolean jpeg, SplittableRandom rng) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try {
      if (!jpeg) {
        ImageIO.write(image, "png", bytes);
        return bytes.toByteArray();
      }
      ImageWriter writer = ImageIO.getImageWritersByFormatName("jpeg").next();
      try (MemoryCacheImageOutputStream out = new MemoryCacheImageOutputStream(bytes)) {
        writer.setOutput(out);
        ImageWriteParam param = writer.getDefaultWriteParam();
        param.setCompressionMode(ImageWriteParam.MODE_EXPLICIT);
        param.setCompressionQuality((float) (0.75 + 0.2 * rng.nextDouble()));
        writer.write(null, new IIOImage(image, null, null), param);
      } finally {
        writer.dispose();
      }
      return bytes.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
