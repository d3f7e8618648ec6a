package dev.ramtrain.etl.image;

import dev.ramtrain.etl.source.RejectedImageException;
import dev.ramtrain.format.ImageShape;
import org.apache.arrow.memory.util.MemoryUtil;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Rect;

/**
 * Decodes a JPEG row of an encoded shard where it lies (mapped memory): only the region a crop
 * needs, at a DCT scale of 1/2..1/8 when the crop is that much larger than its output, straight
 * into the caller's memory, strictly (damage that libjpeg would fill with grey fails). Where the
 * region decoder is not built, or for a JPEG it leaves to OpenCV (CMYK), OpenCV decodes the whole
 * image at the same scale and the region is copied out of it: the same pixels, slower.
 */
public final class JpegRowDecoder {
  private JpegRowDecoder() {}

  /** Whether regions are decoded by libjpeg-turbo directly (else whole images through OpenCV). */
  public static boolean decodesRegions() {
    return JpegRegionDecoder.available();
  }

  /**
   * Writes {@code region} (in the pixels of the image scaled by 1/{@code reduce}) of the {@code
   * length}-byte JPEG at {@code jpeg}, which must decode to {@code stored}, to {@code target} as
   * rows of region width × channels bytes. Returns null, or why the bytes are not such a JPEG.
   */
  public static String decode(
      long jpeg, int length, ImageShape stored, int reduce, Region region, long target) {
    if (reduce != 1 && reduce != 2 && reduce != 4 && reduce != 8) {
      throw new IllegalArgumentException("DCT scale 1/" + reduce + " is not 1/1, 1/2, 1/4, 1/8");
    }
    if (JpegRegionDecoder.available()) {
      String why =
          JpegRegionDecoder.decodeStrict(
              jpeg,
              length,
              stored.width(),
              stored.height(),
              reduce,
              region,
              stored.channels(),
              target);
      if (why == null || !why.startsWith("unsupported")) {
        return why;
      }
    }
    return decodeWhole(jpeg, length, stored, reduce, region, target);
  }

  static String decodeWhole(
      long jpeg, int length, ImageShape stored, int reduce, Region region, long target) {
    byte[] bytes = new byte[length];
    MemoryUtil.copyFromMemory(jpeg, bytes, 0, length);
    ImageHeader header;
    try {
      header = ImageHeader.probe(bytes, (long) stored.width() * stored.height());
    } catch (RejectedImageException e) {
      return e.getMessage();
    }
    if (header.format() != ImageHeader.Format.JPEG
        || header.width() != stored.width()
        || header.height() != stored.height()) {
      return String.format(
          "a %dx%d %s, not a %dx%d JPEG",
          header.width(), header.height(), header.format(), stored.width(), stored.height());
    }
    int channels = stored.channels();
    try (Mat image = ImageDecoder.Kind.OPENCV.create().decode(bytes, header, channels, reduce)) {
      if (region.x() + region.width() > image.cols()
          || region.y() + region.height() > image.rows()) {
        return "region " + region + " outside the decoded " + image.cols() + "x" + image.rows();
      }
      int rowBytes = region.width() * channels;
      try (Rect r = new Rect(region.x(), region.y(), region.width(), region.height());
          Mat view = new Mat(image, r);
          BytePointer out =
              new BytePointer(MemoryUtil.directBuffer(target, rowBytes * region.height()));
          Mat dst =
              new Mat(
                  region.height(),
                  region.width(),
                  org.bytedeco.opencv.global.opencv_core.CV_8UC(channels),
                  out)) {
        view.copyTo(dst);
      }
      return null;
    } catch (RejectedImageException e) {
      return e.getMessage();
    }
  }
}
