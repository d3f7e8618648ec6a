package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.ALGO_HINT_ACCURATE;
import static org.bytedeco.opencv.global.opencv_core.BORDER_ISOLATED;
import static org.bytedeco.opencv.global.opencv_core.BORDER_REFLECT_101;
import static org.bytedeco.opencv.global.opencv_imgproc.GaussianBlur;
import static org.bytedeco.opencv.global.opencv_imgproc.INTER_AREA;
import static org.bytedeco.opencv.global.opencv_imgproc.INTER_LINEAR;
import static org.bytedeco.opencv.global.opencv_imgproc.resize;

import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Size;

/**
 * Resizes without aliasing, fast. Shrinking by less than 2x on an axis (a 500x375 photo to 224,
 * most random crops) low-pass filters that axis with a Gaussian of the variance of PIL's
 * antialiasing filter for bilinear resizes (a triangle of half-width 1/s, variance 1/(6 s^2)), then
 * samples bilinearly: OpenCV's area averaging has no vectorized path at such non-integer ratios and
 * costs twice as much (benchmarks/RESULTS.md). Exact integer ratios and shrinking by 2x or more use
 * area averaging (OpenCV's fast path, or the only one that averages every pixel); enlarging is
 * bilinear. The filter sees only {@code src}'s own pixels, even when it is a view into a larger
 * image, so a crop resizes the same whatever surrounds it.
 */
final class Resample {
  private Resample() {}

  /** {@code src} resized to {@code width} x {@code height}, a new Mat the caller owns. */
  static Mat to(Mat src, int width, int height) {
    Mat out = new Mat();
    into(src, out, width, height);
    return out;
  }

  /**
   * {@code src} resized to {@code width} x {@code height} into {@code out}: in place when {@code
   * out} already has that size and type (a view of memory the caller owns).
   */
  static void into(Mat src, Mat out, int width, int height) {
    double sx = (double) width / src.cols();
    double sy = (double) height / src.rows();
    try (Size size = new Size(width, height)) {
      if (sx >= 1 && sy >= 1) {
        resize(src, out, size, 0, 0, INTER_LINEAR);
      } else if (sx < 0.5 || sy < 0.5 || integerRatio(src.cols(), width, src.rows(), height)) {
        resize(src, out, size, 0, 0, INTER_AREA);
      } else {
        try (Mat smooth = lowPass(src, sx, sy)) {
          resize(smooth, out, size, 0, 0, INTER_LINEAR);
        }
      }
    }
  }

  private static boolean integerRatio(int w, int tw, int h, int th) {
    return w % tw == 0 && h % th == 0;
  }

  /** The Gaussian standard deviation, in source pixels, for shrinking an axis by {@code scale}. */
  static double sigma(double scale) {
    return scale >= 1 ? 0 : 1 / (scale * Math.sqrt(6));
  }

  /**
   * GaussianBlur, not sepFilter2D: for 8-bit images it runs OpenCV's bit-exact fixed-point kernels,
   * twice as fast and the same on every CPU. A 1-wide kernel leaves an axis alone.
   */
  private static Mat lowPass(Mat src, double sx, double sy) {
    Mat out = new Mat();
    double sigmaX = sigma(sx);
    double sigmaY = sigma(sy);
    try (Size size = new Size(taps(sigmaX), taps(sigmaY))) {
      GaussianBlur(
          src,
          out,
          size,
          Math.max(sigmaX, 1e-6),
          Math.max(sigmaY, 1e-6),
          BORDER_REFLECT_101 | BORDER_ISOLATED,
          ALGO_HINT_ACCURATE);
    }
    return out;
  }

  /** Out to 2.5 sigma (99% of the weight), odd; one tap when sigma is 0. */
  private static int taps(double sigma) {
    return 2 * (int) Math.ceil(2.5 * sigma) + 1;
  }
}
