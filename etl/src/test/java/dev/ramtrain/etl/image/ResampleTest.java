package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC3;
import static org.bytedeco.opencv.global.opencv_core.absdiff;
import static org.bytedeco.opencv.global.opencv_core.meanStdDev;
import static org.bytedeco.opencv.global.opencv_imgproc.INTER_AREA;
import static org.bytedeco.opencv.global.opencv_imgproc.INTER_LINEAR;
import static org.bytedeco.opencv.global.opencv_imgproc.resize;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import org.bytedeco.javacpp.indexer.DoubleIndexer;
import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Rect;
import org.bytedeco.opencv.opencv_core.Size;
import org.junit.jupiter.api.Test;

class ResampleTest {

  private static Mat image(int width, int height, PixelRule rule) {
    byte[] hwc = new byte[width * height * 3];
    for (int y = 0; y < height; y++) {
      for (int x = 0; x < width; x++) {
        for (int c = 0; c < 3; c++) {
          hwc[(y * width + x) * 3 + c] = (byte) rule.value(x, y, c);
        }
      }
    }
    Mat m = new Mat(height, width, CV_8UC3);
    m.data().put(hwc);
    return m;
  }

  interface PixelRule {
    int value(int x, int y, int c);
  }

  private static byte[] bytes(Mat m) {
    byte[] out = new byte[(int) m.total() * m.channels()];
    m.data().get(out);
    return out;
  }

  /** Mean and standard deviation over all channels. */
  private static double[] stats(Mat m) {
    try (Mat mean = new Mat();
        Mat sd = new Mat()) {
      meanStdDev(m.reshape(1, 0), mean, sd);
      try (DoubleIndexer mi = mean.createIndexer();
          DoubleIndexer si = sd.createIndexer()) {
        return new double[] {mi.get(0), si.get(0)};
      }
    }
  }

  private static Mat opencv(Mat src, int width, int height, int interpolation) {
    Mat out = new Mat();
    try (Size size = new Size(width, height)) {
      resize(src, out, size, 0, 0, interpolation);
    }
    return out;
  }

  @Test
  void sigmaMatchesTheVarianceOfPilsAntialiasedBilinearFilter() {
    // PIL's triangle of half-width a = 1/s has variance a^2/6.
    assertEquals(Math.sqrt(4.0 / 6), Resample.sigma(0.5), 1e-12);
    assertEquals(Math.sqrt(1 / (0.64 * 6)), Resample.sigma(0.8), 1e-12);
    assertEquals(0, Resample.sigma(1));
    assertEquals(0, Resample.sigma(1.5));
  }

  /** Columns alternating 0 and 255, the highest frequency an image holds. */
  @Test
  void stripesAtTheNyquistFrequencyBecomeFlatGreyInsteadOfMoire() {
    try (Mat stripes = image(375, 375, (x, y, c) -> x % 2 == 0 ? 255 : 0);
        Mat ours = Resample.to(stripes, 224, 224);
        Mat area = opencv(stripes, 224, 224, INTER_AREA);
        Mat linear = opencv(stripes, 224, 224, INTER_LINEAR)) {
      double[] s = stats(ours);
      assertEquals(127.5, s[0], 2.0);
      // PIL's antialiased bilinear leaves a standard deviation of 6.8 here, area averaging 21.7.
      assertTrue(s[1] < 0.8 * stats(area)[1], "antialiased: standard deviation " + s[1]);
      assertTrue(stats(linear)[1] > 60, "plain bilinear sampling aliases the same stripes");
    }
  }

  @Test
  void staysCloseToAreaAveragingOnSmoothContent() {
    SplittableRandom rng = new SplittableRandom(3);
    int[] noise = rng.ints(500 * 375 * 3, -12, 13).toArray();
    PixelRule photoLike =
        (x, y, c) ->
            Math.max(
                0,
                Math.min(
                    255,
                    (int) (128 + 90 * Math.sin(x / 23.0 + c) * Math.cos(y / 31.0))
                        + noise[(y * 500 + x) * 3 + c]));
    try (Mat src = image(500, 375, photoLike);
        Mat ours = Resample.to(src, 299, 224);
        Mat area = opencv(src, 299, 224, INTER_AREA);
        Mat diff = new Mat()) {
      absdiff(ours, area, diff);
      assertTrue(stats(diff)[0] < 3.0, "mean |ours - area| = " + stats(diff)[0]);
    }
  }

  @Test
  void integerRatiosAndLargeShrinksAreExactAreaAveraging() {
    try (Mat src = image(448, 336, (x, y, c) -> (x * 7 + y * 13 + c * 50) % 256)) {
      for (int[] size : new int[][] {{224, 168}, {64, 48}, {100, 80}}) {
        try (Mat ours = Resample.to(src, size[0], size[1]);
            Mat area = opencv(src, size[0], size[1], INTER_AREA)) {
          assertArrayEquals(bytes(area), bytes(ours), size[0] + "x" + size[1]);
        }
      }
      try (Mat ours = Resample.to(src, 500, 400);
          Mat linear = opencv(src, 500, 400, INTER_LINEAR)) {
        assertArrayEquals(bytes(linear), bytes(ours), "enlarging is bilinear");
      }
    }
  }

  /** A random crop is a view into the decoded image; its resize must not see past its edges. */
  @Test
  void aCropResizesAlikeWhateverSurroundsIt() {
    try (Mat src = image(500, 375, (x, y, c) -> (x * 31 + y * 17 + c * 90) % 256);
        Rect rect = new Rect(101, 57, 300, 280);
        Mat view = new Mat(src, rect);
        Mat copy = view.clone();
        Mat fromView = Resample.to(view, 224, 224);
        Mat fromCopy = Resample.to(copy, 224, 224)) {
      assertArrayEquals(bytes(fromCopy), bytes(fromView));
    }
  }
}
