package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC1;
import static org.bytedeco.opencv.global.opencv_core.CV_8UC3;

import dev.ramtrain.files.BundledLibrary;
import org.bytedeco.opencv.opencv_core.Mat;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Decodes only a region of a JPEG (src/main/native/jpeg_region.c over Debian's libjpeg-turbo, the
 * library OpenCV's decoder is built on): what a random crop or a centre crop needs, at the same
 * 1/2..1/8 DCT scales, with exactly the pixels the whole image's decode has there. The region of a
 * random resized crop of a photo decodes 1.3x faster than the whole (benchmarks/RESULTS.md). Where
 * the library is not built or libjpeg.so.62 is missing, or for JPEGs it leaves to OpenCV (CMYK,
 * 12-bit), callers decode the whole image instead: slower, the same pixels.
 */
final class JpegRegionDecoder {
  private static final Logger LOG = LoggerFactory.getLogger(JpegRegionDecoder.class);
  private static final String LIBRARY = "linux-x86_64/libramtrain_jpeg.so";

  /** Null once the library is loaded, else why it is not (loaded once per JVM). */
  private static final String UNAVAILABLE = load();

  private JpegRegionDecoder() {}

  static boolean available() {
    return UNAVAILABLE == null;
  }

  /**
   * {@code region} of the JPEG decoded at 1/{@code reduce} scale (region in the scaled image's
   * pixels), as a Mat the caller owns; null when this JPEG is one to decode whole instead
   * (including any decoding error, which the whole decode then reports its own way).
   */
  static Mat decode(byte[] jpeg, int reduce, Region region, int channels) {
    Mat out = new Mat(region.height(), region.width(), channels == 1 ? CV_8UC1 : CV_8UC3);
    String error =
        decode(
            jpeg,
            jpeg.length,
            reduce,
            region.x(),
            region.y(),
            region.width(),
            region.height(),
            channels,
            out.data().address());
    if (error != null) {
      out.close();
      LOG.debug("decoding the whole image instead of a region: {}", error);
      return null;
    }
    return out;
  }

  /**
   * {@code region} of the JPEG at native address {@code data}, decoded strictly (a warning, as for
   * data that ends early, is an error) into {@code out}: null when done, else why not; a reason
   * starting "unsupported" names a JPEG to decode whole instead, any other one damage.
   */
  static String decodeStrict(
      long data,
      int length,
      int fullWidth,
      int fullHeight,
      int reduce,
      Region region,
      int channels,
      long out) {
    return decodeStrict(
        data,
        length,
        fullWidth,
        fullHeight,
        reduce,
        region.x(),
        region.y(),
        region.width(),
        region.height(),
        channels,
        out);
  }

  private static native String decode(
      byte[] data, int length, int reduce, int x, int y, int w, int h, int channels, long out);

  private static native String decodeStrict(
      long data,
      int length,
      int fullWidth,
      int fullHeight,
      int reduce,
      int x,
      int y,
      int w,
      int h,
      int channels,
      long out);

  private static String load() {
    String why = BundledLibrary.load(JpegRegionDecoder.class, LIBRARY);
    if (why != null) {
      LOG.info("JPEG region decoding unavailable ({}): whole JPEGs are decoded instead", why);
    }
    return why;
  }
}
