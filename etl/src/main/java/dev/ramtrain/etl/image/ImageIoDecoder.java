package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC3;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_BGR2GRAY;
import static org.bytedeco.opencv.global.opencv_imgproc.cvtColor;

import java.awt.Graphics2D;
import java.awt.image.BufferedImage;
import java.awt.image.DataBufferByte;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import javax.imageio.ImageIO;
import org.bytedeco.opencv.opencv_core.Mat;

/** Decodes with the JDK's ImageIO (pure Java); the baseline, and the GIF reader for OpenCV. */
final class ImageIoDecoder implements ImageDecoder {

  static {
    ImageIO.setUseCache(false); // decode in memory, never through temp files
  }

  @Override
  public Mat decode(byte[] bytes, ImageHeader header, int channels, int reduce)
      throws RejectedImageException {
    BufferedImage image;
    try {
      image = ImageIO.read(new ByteArrayInputStream(bytes));
    } catch (IOException | RuntimeException e) {
      RejectReason reason =
          String.valueOf(e.getMessage()).contains("Unsupported")
              ? RejectReason.UNSUPPORTED_FORMAT
              : RejectReason.CORRUPT;
      throw new RejectedImageException(reason, header.format() + ": " + e.getMessage());
    }
    if (image == null) {
      throw new RejectedImageException(RejectReason.UNSUPPORTED_FORMAT, "ImageIO has no reader");
    }
    Mat bgr = toBgr(image);
    if (channels == 3) {
      return bgr;
    }
    try (bgr) {
      Mat grey = new Mat();
      cvtColor(bgr, grey, COLOR_BGR2GRAY);
      return grey;
    }
  }

  /**
   * Copies the pixels into an 8-bit BGR Mat; palette, grey and alpha images are drawn onto black.
   */
  private static Mat toBgr(BufferedImage image) {
    BufferedImage bgr = image;
    if (image.getType() != BufferedImage.TYPE_3BYTE_BGR) {
      bgr = new BufferedImage(image.getWidth(), image.getHeight(), BufferedImage.TYPE_3BYTE_BGR);
      Graphics2D g = bgr.createGraphics();
      g.drawImage(image, 0, 0, null);
      g.dispose();
    }
    byte[] pixels = ((DataBufferByte) bgr.getRaster().getDataBuffer()).getData();
    Mat mat = new Mat(bgr.getHeight(), bgr.getWidth(), CV_8UC3);
    mat.data().put(pixels, 0, pixels.length);
    return mat;
  }
}
