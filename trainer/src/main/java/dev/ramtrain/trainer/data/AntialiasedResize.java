package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.apache.arrow.memory.util.MemoryUtil;

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
public final class AntialiasedResize implements CropResampler {
  private static final int PRECISION_BITS = 32 - 8 - 2;
  private static final int HALF = 1 << (PRECISION_BITS - 1);

  private byte[] sourceRow = new byte[0];
  private int[] rowValues = new int[0]; // sourceRow unsigned
  // The horizontal pass's rows, rounded to 8 bits as Pillow keeps them; held as ints so that the
  // vertical pass is a plain multiply-add the JIT vectorizes.
  private int[] between = new int[0];
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
        for (int x = 0; x < max; x++) { // a triangle's weights are never negative
          double w = total != 0 ? k[x] / total : k[x];
          weights[i * taps + x] = (int) (0.5 + w * (1 << PRECISION_BITS));
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

  @Override
  public void resample(
      long image, ImageShape stored, CropPlan plan, ImageShape out, boolean mirror, long target) {
    resize(
        MemoryUtil.directBuffer(image, stored.bytes()),
        stored.width(),
        stored.channels(),
        plan,
        out.height(),
        out.width(),
        mirror,
        MemoryUtil.directBuffer(target, out.bytes()),
        0);
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
    // Past the span, room for a whole filter's taps: the unrolled pass reads them, weighted 0.
    if (rowValues.length < sourceRow.length + xs.taps() * channels) {
      rowValues = new int[sourceRow.length + xs.taps() * channels];
    }
    if (between.length < (rowTo - rowFrom) * lineBytes) {
      between = new int[(rowTo - rowFrom) * lineBytes];
    }
    for (int y = rowFrom; y < rowTo; y++) {
      int at = ((plan.top() + y) * imageWidth + plan.left() + colFrom) * channels;
      int span = (colTo - colFrom) * channels;
      image.get(at, sourceRow, 0, span);
      for (int i = 0; i < span; i++) {
        rowValues[i] = sourceRow[i] & 0xFF;
      }
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
          sums[i] += between[from + i] * w;
        }
      }
      for (int i = 0; i < lineBytes; i++) {
        outRow[i] = (byte) clip8(sums[i]);
      }
      if (mirror) {
        mirror(outRow, outWidth, channels);
      }
      dst.put(dstOffset + yy * lineBytes, outRow, 0, lineBytes);
    }
  }

  /** One source row (in sourceRow, from column colFrom) filtered into between at {@code to}. */
  private void horizontal(
      Axis xs, int windowLeft, int outWidth, int channels, int colFrom, int to) {
    int taps = xs.taps();
    int[] first = xs.first();
    int[] count = xs.count();
    int[] weights = xs.weights();
    int[] row = rowValues;
    if (channels == 3 && taps == 3) { // RGB enlarged or shrunk < 2x: the common crop, unrolled
      for (int xx = 0; xx < outWidth; xx++) {
        int ox = windowLeft + xx;
        int p = (first[ox] - colFrom) * 3;
        int base = ox * 3;
        int w0 = weights[base];
        int w1 = weights[base + 1];
        int w2 = weights[base + 2];
        int o = to + xx * 3;
        between[o] = clip8(HALF + row[p] * w0 + row[p + 3] * w1 + row[p + 6] * w2);
        between[o + 1] = clip8(HALF + row[p + 1] * w0 + row[p + 4] * w1 + row[p + 7] * w2);
        between[o + 2] = clip8(HALF + row[p + 2] * w0 + row[p + 5] * w1 + row[p + 8] * w2);
      }
      return;
    }
    if (channels == 3) { // RGB: the three sums of a pixel share its taps
      for (int xx = 0; xx < outWidth; xx++) {
        int ox = windowLeft + xx;
        int p = (first[ox] - colFrom) * 3;
        int base = ox * taps;
        int r = HALF;
        int g = HALF;
        int b = HALF;
        for (int t = 0; t < count[ox]; t++, p += 3) {
          int w = weights[base + t];
          r += row[p] * w;
          g += row[p + 1] * w;
          b += row[p + 2] * w;
        }
        int o = to + xx * 3;
        between[o] = clip8(r);
        between[o + 1] = clip8(g);
        between[o + 2] = clip8(b);
      }
      return;
    }
    for (int xx = 0; xx < outWidth; xx++) {
      int ox = windowLeft + xx;
      int from = (first[ox] - colFrom) * channels;
      int base = ox * taps;
      for (int c = 0; c < channels; c++) {
        int sum = HALF;
        for (int t = 0; t < count[ox]; t++) {
          sum += row[from + t * channels + c] * weights[base + t];
        }
        between[to + xx * channels + c] = clip8(sum);
      }
    }
  }

  /**
   * Pillow's clip8 for this filter: its weights are never negative and each output's add up to at
   * most 2^22 + taps / 2 after rounding, so a sum of 8-bit values lies in [2^21, 255 (2^22 + taps /
   * 2) + 2^21] and always shifts to 0..255; Pillow's saturation never acts.
   */
  private static int clip8(int sum) {
    return sum >> PRECISION_BITS;
  }

  /** The row's pixels in reverse order, each pixel's channels kept in order. */
  private static void mirror(byte[] row, int width, int channels) {
    for (int left = 0, right = width - 1; left < right; left++, right--) {
      for (int c = 0; c < channels; c++) {
        byte t = row[left * channels + c];
        row[left * channels + c] = row[right * channels + c];
        row[right * channels + c] = t;
      }
    }
  }

  private static byte[] grown(byte[] a, int size) {
    return a.length >= size ? a : new byte[size];
  }
}
