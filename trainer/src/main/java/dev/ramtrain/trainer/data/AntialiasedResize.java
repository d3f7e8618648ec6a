package dev.ramtrain.trainer.data;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * PIL's antialiased bilinear resize of 8-bit interleaved pixels, to the pixel: what torchvision's
 * {@code resized_crop} and timm's evaluation {@code Resize} do to a PIL image. Each axis is a
 * triangle filter widened by the shrink factor (so shrinking averages every source pixel), weights
 * normalized and rounded to 22-bit fixed point; the horizontal pass runs first and rounds to 8
 * bits, then the vertical one (Pillow's ImagingResample, 8 bits per channel). A {@link CropPlan}
 * says which region, to what size and which window of it; only the window's pixels are computed and
 * each is written once, mirrored when asked.
 *
 * <p>Not thread-safe: it keeps its scratch between calls; one per loader worker.
 */
public final class AntialiasedResize {
  private static final int PRECISION_BITS = 32 - 8 - 2;
  private static final int HALF = 1 << (PRECISION_BITS - 1);

  private byte[] sourceRow = new byte[0];
  private byte[] between = new byte[0]; // the horizontal pass's rows, 8-bit as Pillow keeps them
  private int[] sums = new int[0];
  private byte[] outRow = new byte[0];

  /**
   * One axis's filter: output {@code i} reads {@code count[i]} source pixels from {@code first[i]}
   * with the fixed-point weights at {@code weights[i * taps]}.
   */
  record Axis(int[] first, int[] count, int[] weights, int taps) {
    /**
     * Pillow's precompute_coeffs and normalize_coeffs_8bpc, for {@code in} pixels to {@code out}.
     */
    static Axis of(int in, int out) {
      double scale = (double) in / out;
      double filterScale = Math.max(scale, 1.0);
      double support = filterScale; // bilinear: a support of 1, widened when shrinking
      int taps = (int) Math.ceil(support) * 2 + 1;
      int[] first = new int[out];
      int[] count = new int[out];
      int[] weights = new int[out * taps];
      double[] k = new double[taps];
      double inverse = 1.0 / filterScale; // multiplied, not divided: Pillow's rounding
      for (int i = 0; i < out; i++) {
        double center = (i + 0.5) * scale;
        int min = Math.max(0, (int) (center - support + 0.5)); // C's truncation, as Pillow
        int max = Math.min(in, (int) (center + support + 0.5)) - min;
        double total = 0;
        for (int x = 0; x < max; x++) {
          k[x] = triangle((x + min - center + 0.5) * inverse);
          total += k[x];
        }
        for (int x = 0; x < max; x++) {
          double w = total != 0 ? k[x] / total : k[x];
          weights[i * taps + x] =
              (int) (w < 0 ? -0.5 + w * (1 << PRECISION_BITS) : 0.5 + w * (1 << PRECISION_BITS));
        }
        first[i] = min;
        count[i] = max;
      }
      return new Axis(first, count, weights, taps);
    }

    private static double triangle(double x) {
      double a = Math.abs(x);
      return a < 1 ? 1 - a : 0;
    }
  }

  /**
   * Writes the {@code outHeight × outWidth} window of {@code plan} of {@code image} (rows of {@code
   * imageWidth × channels} bytes from index 0) to {@code dst} at {@code dstOffset}, each row
   * mirrored when {@code mirror}.
   */
  public void resize(
      ByteBuffer image,
      int imageWidth,
      int channels,
      CropPlan plan,
      int outHeight,
      int outWidth,
      boolean mirror,
      ByteBuffer dst,
      int dstOffset) {
    if (plan.windowTop() + outHeight > plan.resizedHeight()
        || plan.windowLeft() + outWidth > plan.resizedWidth()
        || plan.left() + plan.width() > imageWidth) {
      throw new IllegalArgumentException(
          "window " + outHeight + "x" + outWidth + " outside " + plan + " of width " + imageWidth);
    }
    Axis xs = Axis.of(plan.width(), plan.resizedWidth());
    Axis ys = Axis.of(plan.height(), plan.resizedHeight());
    int lastY = plan.windowTop() + outHeight - 1;
    int rowFrom = ys.first()[plan.windowTop()];
    int rowTo = ys.first()[lastY] + ys.count()[lastY];
    int lastX = plan.windowLeft() + outWidth - 1;
    int colFrom = xs.first()[plan.windowLeft()];
    int colTo = xs.first()[lastX] + xs.count()[lastX];
    int lineBytes = outWidth * channels;
    sourceRow = grown(sourceRow, (colTo - colFrom) * channels);
    between = grown(between, (rowTo - rowFrom) * lineBytes);
    for (int y = rowFrom; y < rowTo; y++) {
      int at = ((plan.top() + y) * imageWidth + plan.left() + colFrom) * channels;
      image.get(at, sourceRow, 0, (colTo - colFrom) * channels);
      horizontal(xs, plan.windowLeft(), outWidth, channels, colFrom, (y - rowFrom) * lineBytes);
    }
    if (sums.length < lineBytes) {
      sums = new int[lineBytes];
      outRow = new byte[lineBytes];
    }
    for (int yy = 0; yy < outHeight; yy++) {
      int oy = plan.windowTop() + yy;
      Arrays.fill(sums, 0, lineBytes, HALF);
      int base = oy * ys.taps();
      for (int t = 0; t < ys.count()[oy]; t++) {
        int w = ys.weights()[base + t];
        int from = (ys.first()[oy] + t - rowFrom) * lineBytes;
        for (int i = 0; i < lineBytes; i++) {
          sums[i] += (between[from + i] & 0xFF) * w;
        }
      }
      if (mirror) {
        for (int x = 0; x < outWidth; x++) {
          int to = (outWidth - 1 - x) * channels;
          for (int c = 0; c < channels; c++) {
            outRow[to + c] = clip8(sums[x * channels + c]);
          }
        }
      } else {
        for (int i = 0; i < lineBytes; i++) {
          outRow[i] = clip8(sums[i]);
        }
      }
      dst.put(dstOffset + yy * lineBytes, outRow, 0, lineBytes);
    }
  }

  /** One source row (in sourceRow, from column colFrom) filtered into between at {@code to}. */
  private void horizontal(
      Axis xs, int windowLeft, int outWidth, int channels, int colFrom, int to) {
    int taps = xs.taps();
    for (int xx = 0; xx < outWidth; xx++) {
      int ox = windowLeft + xx;
      int from = (xs.first()[ox] - colFrom) * channels;
      int n = xs.count()[ox];
      int base = ox * taps;
      for (int c = 0; c < channels; c++) {
        int sum = HALF;
        for (int t = 0; t < n; t++) {
          sum += (sourceRow[from + t * channels + c] & 0xFF) * xs.weights()[base + t];
        }
        between[to + xx * channels + c] = clip8(sum);
      }
    }
  }

  /** Pillow's clip8: the fixed-point sum back to 8 bits, saturating. */
  private static byte clip8(int sum) {
    if (sum >= 256 << PRECISION_BITS) {
      return (byte) 255;
    }
    return sum <= 0 ? 0 : (byte) (sum >> PRECISION_BITS);
  }

  private static byte[] grown(byte[] a, int size) {
    return a.length >= size ? a : new byte[size];
  }
}
