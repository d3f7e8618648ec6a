package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC3;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_RGB2GRAY;
import static org.bytedeco.opencv.global.opencv_imgproc.cvtColor;

import dev.ramtrain.etl.source.RejectReason;
import dev.ramtrain.etl.source.RejectedImageException;
import java.awt.image.BufferedImage;
import java.awt.image.DataBufferByte;
import java.awt.image.IndexColorModel;
import java.awt.image.Raster;
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
    Mat rgb = toRgb(image);
    if (channels == 3) {
      return rgb;
    }
    try (rgb) {
      Mat grey = new Mat();
      cvtColor(rgb, grey, COLOR_RGB2GRAY);
      return grey;
    }
  }

  /**
   * Copies the pixels into an 8-bit RGB Mat. Grey rasters are copied as they are (Java2D would
   * treat them as linear grey and brighten them); everything else goes through sRGB, alpha dropped
   * as PIL's convert("RGB") does.
   */
  private static Mat toRgb(BufferedImage image) {
    int w = image.getWidth();
    int h = image.getHeight();
    byte[] rgb = new byte[w * h * 3];
    Raster raster = image.getRaster();
    if (image.getType() == BufferedImage.TYPE_3BYTE_BGR) { // what ImageIO gives for JPEGs
      byte[] bgr = ((DataBufferByte) raster.getDataBuffer()).getData();
      for (int i = 0; i < rgb.length; i += 3) {
        rgb[i] = bgr[i + 2];
        rgb[i + 1] = bgr[i + 1];
        rgb[i + 2] = bgr[i];
      }
    } else if (raster.getNumBands() == 1 && !(image.getColorModel() instanceof IndexColorModel)) {
      int shift = raster.getSampleModel().getSampleSize(0) - 8;
      int[] grey = raster.getSamples(0, 0, w, h, 0, (int[]) null);
      for (int p = 0; p < grey.length; p++) {
        byte v = (byte) (shift > 0 ? grey[p] >> shift : grey[p]);
        rgb[3 * p] = v;
        rgb[3 * p + 1] = v;
        rgb[3 * p + 2] = v;
      }
    } else {
      int[] argb = image.getRGB(0, 0, w, h, null, 0, w);
      for (int p = 0; p < argb.length; p++) {
        rgb[3 * p] = (byte) (argb[p] >> 16);
        rgb[3 * p + 1] = (byte) (argb[p] >> 8);
        rgb[3 * p + 2] = (byte) argb[p];
      }
    }
    Mat mat = new Mat(h, w, CV_8UC3);
    mat.data().put(rgb, 0, rgb.length);
    return mat;
  }
}
