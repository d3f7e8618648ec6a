package dev.ramtrain.etl.image;

import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import javax.imageio.ImageIO;

/** Encodes test images with ImageIO, an encoder independent of the decoders under test. */
public final class Encoded {
  private Encoded() {}

  public static byte[] encode(BufferedImage image, String format) {
    try {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      if (!ImageIO.write(image, format, out)) {
        throw new IllegalStateException(
            "no ImageIO writer for " + format + " type " + image.getType());
      }
      return out.toByteArray();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** An RGB image whose pixel (x, y) is given by {@code rgb}. */
  public static BufferedImage rgb(int width, int height, java.util.function.IntBinaryOperator rgb) {
    BufferedImage image = new BufferedImage(width, height, BufferedImage.TYPE_INT_RGB);
    for (int y = 0; y < height; y++) {
      for (int x = 0; x < width; x++) {
        image.setRGB(x, y, rgb.applyAsInt(x, y));
      }
    }
    return image;
  }
}
