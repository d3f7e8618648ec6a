package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC3;
import static org.bytedeco.opencv.global.opencv_core.CV_8UC4;
import static org.bytedeco.opencv.global.opencv_imgcodecs.imencode;

import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import javax.imageio.ImageIO;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.indexer.UByteIndexer;
import org.bytedeco.opencv.opencv_core.Mat;

/**
 * Encodes test images with ImageIO, an encoder independent of the decoders under test, and with
 * OpenCV for what ImageIO cannot write.
 */
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

  /**
   * A 37x23 BGR test card (value (7x + 11y + 60c) mod 256 in channel c), encoded by OpenCV: for the
   * formats ImageIO does not write (WebP) and little-endian TIFF.
   */
  public static byte[] openCv(String extension, int channels, int... params) {
    try (Mat image = new Mat(23, 37, channels == 4 ? CV_8UC4 : CV_8UC3);
        BytePointer out = new BytePointer();
        IntPointer options = new IntPointer(params)) {
      UByteIndexer px = image.createIndexer();
      for (int y = 0; y < 23; y++) {
        for (int x = 0; x < 37; x++) {
          for (int c = 0; c < channels; c++) {
            px.put(y, x, c, (x * 7 + y * 11 + c * 60) & 0xFF);
          }
        }
      }
      imencode(extension, image, out, options);
      byte[] bytes = new byte[(int) out.limit()];
      out.get(bytes);
      return bytes;
    }
  }
}
