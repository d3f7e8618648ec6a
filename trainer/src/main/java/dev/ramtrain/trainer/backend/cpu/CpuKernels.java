package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.ColumnSumOrder;
import dev.ramtrain.trainer.backend.CounterRng;
import dev.ramtrain.trainer.backend.GradClipMath;
import dev.ramtrain.trainer.backend.SgdMath;
import dev.ramtrain.trainer.backend.ops.ColorJitter;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import java.util.Arrays;

/** The CPU backend's kernels: plain loops split across cores; the reference for other backends. */
final class CpuKernels {
  private static final double SQRT_HALF = Math.sqrt(0.5);
  private static final double INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);
  private static final int GRAIN = 1 << 14;
  // Elementwise kernels copy through heap blocks of this size: small enough to stay in L1/L2 and
  // far from G1's humongous-object size (a whole chunk per array was megabytes per call).
  private static final int BLOCK = 1 << 12;

  private final Parallel parallel;

  CpuKernels(Parallel parallel) {
    this.parallel = parallel;
  }

  void fill(FloatBuffer x, float value) {
    parallel.forRange(
        x.capacity(),
        GRAIN,
        (from, to) -> {
          // bulk copies of a filled block: element puts into a direct buffer do not vectorize
          float[] block = new float[Math.min(BLOCK, to - from)];
          Arrays.fill(block, value);
          for (int start = from; start < to; start += block.length) {
            x.put(start, block, 0, Math.min(block.length, to - start));
          }
        });
  }

  void addBias(FloatBuffer y, FloatBuffer bias, int rows, int cols) {
    parallel.forRange(
        rows,
        Math.max(1, GRAIN / cols),
        (from, to) -> {
          // a row at a time through arrays, a loop the JIT vectorizes
          float[] b = new float[cols];
          float[] row = new float[cols];
          bias.get(0, b);
          for (int r = from; r < to; r++) {
            y.get(r * cols, row);
            for (int c = 0; c < cols; c++) {
              row[c] += b[c];
            }
            y.put(r * cols, row);
          }
        });
  }

  void sumRows(FloatBuffer x, FloatBuffer out, int rows, int cols, float beta) {
    // Each column's sum in ColumnSumOrder's order, as the CUDA kernel sums (linear.cu): lane l the
    // rows r ≡ l (mod lanes) in increasing order, each group's 16 lanes in lane order, then the
    // groups. The rows are read in order, a block of columns at a time (walking down a column
    // touched a cache line per element).
    int groups = ColumnSumOrder.groups(rows, cols);
    int lanes = ColumnSumOrder.LANES * groups;
    parallel.forRange(
        cols,
        Math.max(1, GRAIN / Math.max(1, rows)),
        (from, to) -> {
          // At most 32,768 lane sums (256 KiB) at a time, so they stay in the core's cache.
          int width = Math.max(8, (1 << 15) / lanes);
          float[] row =
              new float[Math.min(Math.min(BLOCK / ColumnSumOrder.LANES, width), to - from)];
          double[] sums = new double[lanes * row.length]; // [lane][column]
          for (int start = from; start < to; start += row.length) {
            int len = Math.min(row.length, to - start);
            java.util.Arrays.fill(sums, 0);
            for (int r = 0; r < rows; r++) {
              x.get(r * cols + start, row, 0, len);
              int at = (r % lanes) * row.length;
              for (int i = 0; i < len; i++) {
                sums[at + i] += row[i];
              }
            }
            for (int i = 0; i < len; i++) {
              double sum = ColumnSumOrder.total(sums, row.length, i, groups);
              int c = start + i;
              out.put(c, (float) (beta == 0 ? sum : beta * out.get(c) + sum));
            }
          }
        });
  }

  void relu(FloatBuffer x, FloatBuffer y) {
    parallel.forRange(
        x.capacity(),
        GRAIN,
        (from, to) -> {
          float[] a = new float[BLOCK];
          for (int start = from; start < to; start += BLOCK) {
            int len = Math.min(BLOCK, to - start);
            x.get(start, a, 0, len);
            for (int i = 0; i < len; i++) {
              a[i] = Math.max(a[i], 0f); // an intrinsic, no branch: signs of real data are random
            }
            y.put(start, a, 0, len);
          }
        });
  }

  void reluBackward(FloatBuffer x, FloatBuffer dy, FloatBuffer dx) {
    parallel.forRange(
        x.capacity(),
        GRAIN,
        (from, to) -> {
          float[] a = new float[BLOCK];
          float[] g = new float[BLOCK];
          for (int start = from; start < to; start += BLOCK) {
            int len = Math.min(BLOCK, to - start);
            x.get(start, a, 0, len);
            dy.get(start, g, 0, len);
            for (int i = 0; i < len; i++) {
              // Branch-free x > 0 test (a mispredicted branch per element cost ~10x): the sign bit
              // or an all-zero pattern turns the mask off.
              int bits = Float.floatToRawIntBits(a[i]);
              int keep = ~(((bits - 1) | bits) >> 31);
              g[i] = Float.intBitsToFloat(Float.floatToRawIntBits(g[i]) & keep);
            }
            dx.put(start, g, 0, len);
          }
        });
  }

  void gelu(FloatBuffer x, FloatBuffer y) {
    parallel.forRange(
        x.capacity(),
        GRAIN,
        (from, to) -> {
          for (int i = from; i < to; i++) {
            double v = x.get(i);
            y.put(i, (float) (0.5 * v * (1 + erf(v * SQRT_HALF))));
          }
        });
  }

  void geluBackward(FloatBuffer x, FloatBuffer dy, FloatBuffer dx) {
    parallel.forRange(
        x.capacity(),
        GRAIN,
        (from, to) -> {
          for (int i = from; i < to; i++) {
            double v = x.get(i);
            double cdf = 0.5 * (1 + erf(v * SQRT_HALF));
            double pdf = INV_SQRT_2PI * Math.exp(-0.5 * v * v);
            dx.put(i, (float) (dy.get(i) * (cdf + v * pdf)));
          }
        });
  }

  void softmaxCrossEntropy(
      FloatBuffer logits,
      IntBuffer labels,
      int rows,
      int classes,
      float smoothing,
      float mix,
      FloatBuffer loss,
      FloatBuffer dlogits) {
    double off = smoothing / classes;
    double on = 1 - smoothing + off;
    double lambda = mix;
    double other = 1 - lambda;
    parallel.forRange(
        rows,
        Math.max(1, GRAIN / classes),
        (from, to) -> {
          for (int r = from; r < to; r++) {
            int label = checkedLabel(labels, r, classes);
            int partner = mix == 1f ? label : checkedLabel(labels, rows - 1 - r, classes);
            int base = r * classes;
            double max = Double.NEGATIVE_INFINITY;
            for (int c = 0; c < classes; c++) {
              max = Math.max(max, logits.get(base + c));
            }
            double sum = 0;
            for (int c = 0; c < classes; c++) {
              sum += Math.exp(logits.get(base + c) - max);
            }
            double logSum = max + Math.log(sum);
            double rowLoss = 0;
            for (int c = 0; c < classes; c++) {
              double target =
                  mix == 1f
                      ? (c == label ? on : off)
                      : lambda * (c == label ? on : off) + other * (c == partner ? on : off);
              double logp = logits.get(base + c) - logSum;
              rowLoss -= target * logp;
              dlogits.put(base + c, (float) ((Math.exp(logp) - target) / rows));
            }
            loss.put(r, (float) rowLoss);
          }
        });
  }

  private static int checkedLabel(IntBuffer labels, int row, int classes) {
    int label = labels.get(row);
    if (label < 0 || label >= classes) {
      throw new IllegalArgumentException(
          "label " + label + " of row " + row + " outside [0, " + classes + ")");
    }
    return label;
  }

  /** timm's batch mixup in place: x[i] = λ x[i] + (1 - λ) x[batch - 1 - i], pairs at once. */
  void blendBatch(FloatBuffer x, int batch, long sampleSize, float lambda, float oneMinus) {
    parallel.forRange(
        batch / 2,
        1,
        (from, to) -> {
          for (int i = from; i < to; i++) {
            long a = i * sampleSize;
            long b = (long) (batch - 1 - i) * sampleSize;
            for (long k = 0; k < sampleSize; k++) {
              float xa = x.get((int) (a + k));
              float xb = x.get((int) (b + k));
              float mixedA = xa * lambda;
              float mixedB = xb * lambda;
              x.put((int) (a + k), mixedA + xb * oneMinus);
              x.put((int) (b + k), mixedB + xa * oneMinus);
            }
          }
        });
    if (batch % 2 == 1) { // the middle sample is its own mirror: λ x + (1 - λ) x, rounded alike
      long m = (long) (batch / 2) * sampleSize;
      for (long k = 0; k < sampleSize; k++) {
        float v = x.get((int) (m + k));
        x.put((int) (m + k), v * lambda + v * oneMinus);
      }
    }
  }

  /** timm's batch cutmix in place: each pair (i, batch - 1 - i) swaps the box of every channel. */
  void cutMixBatch(
      FloatBuffer x,
      int batch,
      int channels,
      int height,
      int width,
      int top,
      int bottom,
      int left,
      int right) {
    long plane = (long) height * width;
    long sample = channels * plane;
    parallel.forRange(
        batch / 2,
        1,
        (from, to) -> {
          for (int i = from; i < to; i++) {
            long a = i * sample;
            long b = (long) (batch - 1 - i) * sample;
            for (int c = 0; c < channels; c++) {
              for (int y = top; y < bottom; y++) {
                for (int col = left; col < right; col++) {
                  int pa = (int) (a + c * plane + (long) y * width + col);
                  int pb = (int) (b + c * plane + (long) y * width + col);
                  float t = x.get(pa);
                  x.put(pa, x.get(pb));
                  x.put(pb, t);
                }
              }
            }
          }
        });
  }

  /** {@link ColorJitter} on each image of the batch, images in parallel. */
  void colorJitter(FloatBuffer x, ColorJitter op) {
    int plane = op.height() * op.width();
    int c = op.channels();
    parallel.forRange(
        op.batch(),
        1,
        (from, to) -> {
          float[] v = new float[c * plane];
          for (int i = from; i < to; i++) {
            int base = i * c * plane;
            x.get(base, v, 0, v.length);
            for (int ch = 0; ch < c; ch++) { // back to [0, 1]
              for (int p = 0; p < plane; p++) {
                v[ch * plane + p] = v[ch * plane + p] * op.std()[ch] + op.mean()[ch];
              }
            }
            for (int which : ColorJitter.order(op.seed(), i)) {
              float s = op.strength(which);
              if (s == 0 || (which == 2 && c == 1)) {
                continue;
              }
              adjust(v, c, plane, which, ColorJitter.factor(s, op.seed(), i, which));
            }
            for (int ch = 0; ch < c; ch++) { // normalized again
              for (int p = 0; p < plane; p++) {
                v[ch * plane + p] = (v[ch * plane + p] - op.mean()[ch]) / op.std()[ch];
              }
            }
            x.put(base, v, 0, v.length);
          }
        });
  }

  /** One jitter adjustment of an image in [0, 1], CHW in {@code v}; clamped as torchvision's. */
  private static void adjust(float[] v, int c, int plane, int which, float f) {
    float g = 1 - f;
    switch (which) {
      case 0 -> {
        for (int k = 0; k < v.length; k++) {
          v[k] = unit(f * v[k]);
        }
      }
      case 1 -> {
        double sum = 0; // the image's mean grey, in double, pixel after pixel
        for (int p = 0; p < plane; p++) {
          sum += grey(v, c, plane, p);
        }
        float m = (float) (sum / plane);
        for (int k = 0; k < v.length; k++) {
          v[k] = unit(f * v[k] + g * m);
        }
      }
      default -> {
        for (int p = 0; p < plane; p++) {
          float grey = grey(v, c, plane, p);
          for (int ch = 0; ch < c; ch++) {
            v[ch * plane + p] = unit(f * v[ch * plane + p] + g * grey);
          }
        }
      }
    }
  }

  private static float grey(float[] v, int c, int plane, int p) {
    return c == 1
        ? v[p]
        : ColorJitter.RED * v[p]
            + ColorJitter.GREEN * v[plane + p]
            + ColorJitter.BLUE * v[2 * plane + p];
  }

  private static float unit(float v) {
    return Math.min(Math.max(v, 0f), 1f);
  }

  void normalizeImages(
      ByteBuffer u8, int n, int h, int w, int c, float[] mean, float[] std, FloatBuffer out) {
    int plane = h * w;
    parallel.forRange(
        n,
        1,
        (from, to) -> {
          // An image's interleaved bytes in one bulk read, each channel's plane in one bulk write.
          byte[] pixels = new byte[plane * c];
          float[] values = new float[plane];
          for (int image = from; image < to; image++) {
            u8.get(image * plane * c, pixels);
            for (int ch = 0; ch < c; ch++) {
              float scale = 1f / (255f * std[ch]);
              float shift = mean[ch] / std[ch];
              for (int p = 0; p < plane; p++) {
                values[p] = (pixels[p * c + ch] & 0xFF) * scale - shift;
              }
              out.put((image * c + ch) * plane, values);
            }
          }
        });
  }

  void sgdStep(
      FloatBuffer param,
      FloatBuffer grad,
      FloatBuffer buf,
      float lr,
      float mu,
      float wd,
      boolean nesterov) {
    SgdMath math = new SgdMath(lr, mu, wd, nesterov);
    parallel.forRange(
        param.capacity(), GRAIN, (from, to) -> math.update(param, grad, buf, from, to));
  }

  void adamwStep(
      FloatBuffer param,
      FloatBuffer grad,
      FloatBuffer m,
      FloatBuffer v,
      float lr,
      float beta1,
      float beta2,
      float eps,
      float wd,
      int step) {
    AdamWMath math = AdamWMath.of(lr, beta1, beta2, eps, wd, step);
    parallel.forRange(
        param.capacity(), GRAIN, (from, to) -> math.update(param, grad, m, v, from, to));
  }

  // The convolution and pooling kernels work plane by plane on heap arrays: one bulk copy in and
  // one out per (image, channel) plane, and plain array loops in between (per-element buffer
  // access costs several times more).

  void im2col(FloatBuffer x, ConvWindow window, FloatBuffer cols) {
    int n = window.n();
    int c = window.c();
    int h = window.h();
    int w = window.w();
    int kh = window.kh();
    int kw = window.kw();
    int stride = window.stride();
    int pad = window.pad();
    int oh = window.oh();
    int ow = window.ow();
    int block = c * kh * kw * oh * ow;
    parallel.forRange(
        n * c,
        1,
        (from, to) -> {
          float[] plane = new float[h * w];
          float[] row = new float[oh * ow];
          for (int nc = from; nc < to; nc++) {
            int img = nc / c;
            int ch = nc % c;
            x.get(nc * h * w, plane);
            for (int ky = 0; ky < kh; ky++) {
              for (int kx = 0; kx < kw; kx++) {
                // Output columns whose input column ix = ox*stride - pad + kx lies in the plane.
                int oxFirst = firstInside(pad - kx, stride);
                int oxEnd = Math.min(ow, endInside(w + pad - kx, stride));
                for (int oy = 0; oy < oh; oy++) {
                  int iy = oy * stride - pad + ky;
                  int at = oy * ow;
                  if (iy < 0 || iy >= h || oxFirst >= oxEnd) {
                    Arrays.fill(row, at, at + ow, 0f);
                    continue;
                  }
                  for (int o = 0; o < oxFirst; o++) { // the padding: a column or two
                    row[at + o] = 0f;
                  }
                  for (int o = oxEnd; o < ow; o++) {
                    row[at + o] = 0f;
                  }
                  int src = iy * w + oxFirst * stride - pad + kx;
                  if (stride == 1) {
                    System.arraycopy(plane, src, row, at + oxFirst, oxEnd - oxFirst);
                  } else {
                    for (int ox = oxFirst; ox < oxEnd; ox++, src += stride) {
                      row[at + ox] = plane[src];
                    }
                  }
                }
                cols.put(img * block + ((ch * kh + ky) * kw + kx) * oh * ow, row);
              }
            }
          }
        });
  }

  void col2im(FloatBuffer cols, ConvWindow window, FloatBuffer dx) {
    int n = window.n();
    int c = window.c();
    int h = window.h();
    int w = window.w();
    int kh = window.kh();
    int kw = window.kw();
    int stride = window.stride();
    int pad = window.pad();
    int oh = window.oh();
    int ow = window.ow();
    int block = c * kh * kw * oh * ow;
    parallel.forRange(
        n * c,
        1,
        (from, to) -> { // one (image, channel) plane per index: no write races
          float[] plane = new float[h * w];
          float[] row = new float[oh * ow];
          for (int nc = from; nc < to; nc++) {
            int img = nc / c;
            int ch = nc % c;
            Arrays.fill(plane, 0f);
            for (int ky = 0; ky < kh; ky++) {
              for (int kx = 0; kx < kw; kx++) {
                cols.get(img * block + ((ch * kh + ky) * kw + kx) * oh * ow, row);
                int oxFirst = firstInside(pad - kx, stride);
                int oxEnd = Math.min(ow, endInside(w + pad - kx, stride));
                for (int oy = 0; oy < oh; oy++) {
                  int iy = oy * stride - pad + ky;
                  if (iy < 0 || iy >= h) {
                    continue;
                  }
                  int dst = iy * w + oxFirst * stride - pad + kx;
                  int at = oy * ow + oxFirst;
                  if (stride == 1) { // contiguous on both sides: a loop the JIT vectorizes
                    for (int o = 0; o < oxEnd - oxFirst; o++) {
                      plane[dst + o] += row[at + o];
                    }
                  } else {
                    for (int ox = oxFirst; ox < oxEnd; ox++, at++, dst += stride) {
                      plane[dst] += row[at];
                    }
                  }
                }
              }
            }
            dx.put(nc * h * w, plane);
          }
        });
  }

  /** The first output index o with o * stride >= lowest (o >= 0). */
  private static int firstInside(int lowest, int stride) {
    return lowest <= 0 ? 0 : (lowest + stride - 1) / stride;
  }

  /** One past the last output index o with o * stride < limit. */
  private static int endInside(int limit, int stride) {
    return limit <= 0 ? 0 : (limit + stride - 1) / stride;
  }

  void addChannelBias(FloatBuffer y, FloatBuffer bias, int n, int c, int hw) {
    parallel.forRange(
        n * c,
        Math.max(1, GRAIN / hw),
        (from, to) -> {
          float[] plane = new float[hw];
          for (int nc = from; nc < to; nc++) {
            float b = bias.get(nc % c);
            y.get(nc * hw, plane);
            for (int p = 0; p < hw; p++) {
              plane[p] += b;
            }
            y.put(nc * hw, plane);
          }
        });
  }

  void sumChannels(FloatBuffer dy, FloatBuffer out, int n, int c, int hw) {
    parallel.forRange(
        c,
        1,
        (from, to) -> {
          float[] plane = new float[hw];
          float[] lanes = new float[hw]; // per-position partial sums: a vectorizable add per plane
          for (int ch = from; ch < to; ch++) {
            Arrays.fill(lanes, 0f);
            for (int img = 0; img < n; img++) {
              dy.get((img * c + ch) * hw, plane);
              for (int p = 0; p < hw; p++) {
                lanes[p] += plane[p];
              }
            }
            double sum = 0;
            for (float v : lanes) {
              sum += v;
            }
            out.put(ch, out.get(ch) + (float) sum);
          }
        });
  }

  void maxPool(
      FloatBuffer x,
      int n,
      int c,
      int h,
      int w,
      int k,
      int stride,
      int pad,
      FloatBuffer y,
      IntBuffer argmax) {
    int oh = (h + 2 * pad - k) / stride + 1;
    int ow = (w + 2 * pad - k) / stride + 1;
    parallel.forRange(
        n * c,
        1,
        (from, to) -> {
          float[] plane = new float[h * w];
          float[] best = new float[oh * ow];
          int[] where = new int[oh * ow];
          for (int nc = from; nc < to; nc++) {
            x.get(nc * h * w, plane);
            if (k == 2 && stride == 2 && pad == 0) {
              pool2x2(plane, w, oh, ow, best, where);
              y.put(nc * oh * ow, best);
              argmax.put(nc * oh * ow, where);
              continue;
            }
            for (int oy = 0; oy < oh; oy++) {
              for (int ox = 0; ox < ow; ox++) {
                int at = -1; // padding never wins: the first in-plane value starts
                for (int ky = 0; ky < k; ky++) {
                  int iy = oy * stride - pad + ky;
                  if (iy < 0 || iy >= h) {
                    continue;
                  }
                  for (int kx = 0; kx < k; kx++) {
                    int ix = ox * stride - pad + kx;
                    if (ix < 0 || ix >= w) {
                      continue;
                    }
                    int i = iy * w + ix;
                    if (at < 0 || plane[i] > plane[at]) {
                      at = i;
                    }
                  }
                }
                best[oy * ow + ox] = plane[at];
                where[oy * ow + ox] = at;
              }
            }
            y.put(nc * oh * ow, best);
            argmax.put(nc * oh * ow, where);
          }
        });
  }

  /**
   * The common 2×2, stride-2 window, branch-free: on real activations the winner is random, and a
   * mispredicted branch per comparison made this 5× slower. The scan order and first-wins ties are
   * the general loop's; the sign of {@code best - candidate} decides ({@code -0} vs {@code +0} may
   * pick either, both equal).
   */
  private static void pool2x2(float[] plane, int w, int oh, int ow, float[] best, int[] where) {
    for (int oy = 0; oy < oh; oy++) {
      int top = 2 * oy * w;
      int out = oy * ow;
      for (int ox = 0; ox < ow; ox++) {
        int i = top + 2 * ox;
        float v = plane[i];
        int at = i;
        float b = plane[i + 1];
        at += (Float.floatToRawIntBits(v - b) >>> 31) * (i + 1 - at); // moves when b > v
        v = Math.max(v, b);
        float c = plane[i + w];
        at += (Float.floatToRawIntBits(v - c) >>> 31) * (i + w - at);
        v = Math.max(v, c);
        float d = plane[i + w + 1];
        at += (Float.floatToRawIntBits(v - d) >>> 31) * (i + w + 1 - at);
        v = Math.max(v, d);
        best[out + ox] = v;
        where[out + ox] = at;
      }
    }
  }

  void maxPoolBackward(
      FloatBuffer dy,
      IntBuffer argmax,
      int n,
      int c,
      int h,
      int w,
      int oh,
      int ow,
      FloatBuffer dx) {
    parallel.forRange(
        n * c,
        1,
        (from, to) -> {
          float[] plane = new float[h * w];
          float[] grad = new float[oh * ow];
          int[] where = new int[oh * ow];
          for (int nc = from; nc < to; nc++) {
            Arrays.fill(plane, 0f);
            dy.get(nc * oh * ow, grad);
            argmax.get(nc * oh * ow, where);
            for (int i = 0; i < grad.length; i++) {
              plane[where[i]] += grad[i];
            }
            dx.put(nc * h * w, plane);
          }
        });
  }

  void clipGradNorm(FloatBuffer grads, float maxNorm, FloatBuffer norm) {
    int n = grads.capacity();
    double[] partial = new double[GradClipMath.chunks(n)];
    parallel.forRange(
        partial.length,
        1,
        (from, to) -> {
          for (int c = from; c < to; c++) {
            partial[c] = GradClipMath.chunkSumOfSquares(grads, c, n);
          }
        });
    float l2 = GradClipMath.norm(partial);
    norm.put(0, l2);
    float coef = GradClipMath.scale(maxNorm, l2);
    if (coef < 1) {
      parallel.forRange(n, GRAIN, (from, to) -> GradClipMath.scale(grads, coef, from, to));
    }
  }

  /** erf with absolute error below 1.2e-7 (W. H. Press et al., erfc by Chebyshev fit). */
  static double erf(double x) {
    double z = Math.abs(x);
    double t = 1 / (1 + 0.5 * z);
    double erfc =
        t
            * Math.exp(
                -z * z
                    - 1.26551223
                    + t
                        * (1.00002368
                            + t
                                * (0.37409196
                                    + t
                                        * (0.09678418
                                            + t
                                                * (-0.18628806
                                                    + t
                                                        * (0.27886807
                                                            + t
                                                                * (-1.13520398
                                                                    + t
                                                                        * (1.48851587
                                                                            + t
                                                                                * (-0.82215223
                                                                                    + t
                                                                                        * 0.17087277)))))))));
    return x >= 0 ? 1 - erfc : erfc - 1;
  }

  void add(FloatBuffer a, FloatBuffer b, FloatBuffer out) {
    elementwise(a, b, out, (x, y) -> x + y);
  }

  /** target += weight · (source − target), fused: the CUDA kernel's fmaf, bit for bit. */
  void lerp(FloatBuffer target, FloatBuffer source, float weight) {
    elementwise(target, source, target, (t, x) -> Math.fma(weight, x - t, t));
  }

  void multiply(FloatBuffer a, FloatBuffer b, FloatBuffer out) {
    elementwise(a, b, out, (x, y) -> x * y);
  }

  private interface FloatOp {
    float apply(float x, float y);
  }

  private void elementwise(FloatBuffer a, FloatBuffer b, FloatBuffer out, FloatOp op) {
    parallel.forRange(
        out.capacity(),
        GRAIN,
        (from, to) -> {
          float[] x = new float[BLOCK];
          float[] y = new float[BLOCK];
          for (int start = from; start < to; start += BLOCK) {
            int len = Math.min(BLOCK, to - start);
            a.get(start, x, 0, len);
            b.get(start, y, 0, len);
            for (int i = 0; i < len; i++) {
              x[i] = op.apply(x[i], y[i]);
            }
            out.put(start, x, 0, len);
          }
        });
  }

  void dropoutMask(float p, long seed, FloatBuffer mask) {
    float keep = 1 / (1 - p);
    parallel.forRange(
        mask.capacity(),
        GRAIN,
        (from, to) -> {
          for (int i = from; i < to; i++) {
            mask.put(i, CounterRng.uniform(seed, i) < p ? 0f : keep);
          }
        });
  }

  // Batch normalization works channel by channel (one task per channel), plane by plane within.

  void batchNormTrain(
      FloatBuffer x,
      int n,
      int c,
      int hw,
      FloatBuffer gamma,
      FloatBuffer beta,
      float eps,
      float momentum,
      FloatBuffer runningMean,
      FloatBuffer runningVar,
      FloatBuffer y,
      FloatBuffer savedMean,
      FloatBuffer savedInvStd) {
    long count = (long) n * hw;
    parallel.forRange(
        c,
        1,
        (from, to) -> {
          float[] plane = new float[hw];
          for (int ch = from; ch < to; ch++) {
            double sum = 0;
            for (int img = 0; img < n; img++) {
              x.get((img * c + ch) * hw, plane);
              for (float v : plane) {
                sum += v;
              }
            }
            double mean = sum / count;
            double squares = 0;
            for (int img = 0; img < n; img++) {
              x.get((img * c + ch) * hw, plane);
              for (float v : plane) {
                squares += (v - mean) * (v - mean);
              }
            }
            double var = squares / count;
            double invStd = 1 / Math.sqrt(var + eps);
            float scale = (float) (gamma.get(ch) * invStd);
            float shift = (float) (beta.get(ch) - mean * gamma.get(ch) * invStd);
            for (int img = 0; img < n; img++) {
              int at = (img * c + ch) * hw;
              x.get(at, plane);
              for (int p = 0; p < hw; p++) {
                plane[p] = plane[p] * scale + shift;
              }
              y.put(at, plane);
            }
            savedMean.put(ch, (float) mean);
            savedInvStd.put(ch, (float) invStd);
            double unbiased = count > 1 ? squares / (count - 1) : var;
            runningMean.put(ch, (float) ((1 - momentum) * runningMean.get(ch) + momentum * mean));
            runningVar.put(ch, (float) ((1 - momentum) * runningVar.get(ch) + momentum * unbiased));
          }
        });
  }

  void batchNormInference(
      FloatBuffer x,
      int n,
      int c,
      int hw,
      FloatBuffer gamma,
      FloatBuffer beta,
      float eps,
      FloatBuffer runningMean,
      FloatBuffer runningVar,
      FloatBuffer y) {
    parallel.forRange(
        n * c,
        Math.max(1, GRAIN / hw),
        (from, to) -> {
          float[] plane = new float[hw];
          for (int nc = from; nc < to; nc++) {
            int ch = nc % c;
            double invStd = 1 / Math.sqrt(runningVar.get(ch) + eps);
            float scale = (float) (gamma.get(ch) * invStd);
            float shift = (float) (beta.get(ch) - runningMean.get(ch) * gamma.get(ch) * invStd);
            x.get(nc * hw, plane);
            for (int p = 0; p < hw; p++) {
              plane[p] = plane[p] * scale + shift;
            }
            y.put(nc * hw, plane);
          }
        });
  }

  void batchNormBackward(
      FloatBuffer x,
      FloatBuffer dy,
      int n,
      int c,
      int hw,
      FloatBuffer gamma,
      FloatBuffer savedMean,
      FloatBuffer savedInvStd,
      FloatBuffer dgamma,
      FloatBuffer dbeta,
      FloatBuffer dx) {
    long count = (long) n * hw;
    parallel.forRange(
        c,
        1,
        (from, to) -> {
          float[] plane = new float[hw];
          float[] grad = new float[hw];
          for (int ch = from; ch < to; ch++) {
            float mean = savedMean.get(ch);
            float invStd = savedInvStd.get(ch);
            double sumDy = 0;
            double sumDyXhat = 0;
            for (int img = 0; img < n; img++) {
              int at = (img * c + ch) * hw;
              x.get(at, plane);
              dy.get(at, grad);
              for (int p = 0; p < hw; p++) {
                sumDy += grad[p];
                sumDyXhat += grad[p] * (plane[p] - mean) * invStd;
              }
            }
            // dx = gamma * invStd * (dy - mean(dy) - xhat * mean(dy * xhat))
            float k = gamma.get(ch) * invStd;
            float meanDy = (float) (sumDy / count);
            float meanDyXhat = (float) (sumDyXhat / count);
            for (int img = 0; img < n; img++) {
              int at = (img * c + ch) * hw;
              x.get(at, plane);
              dy.get(at, grad);
              for (int p = 0; p < hw; p++) {
                float xhat = (plane[p] - mean) * invStd;
                grad[p] = k * (grad[p] - meanDy - xhat * meanDyXhat);
              }
              dx.put(at, grad);
            }
            dgamma.put(ch, dgamma.get(ch) + (float) sumDyXhat);
            dbeta.put(ch, dbeta.get(ch) + (float) sumDy);
          }
        });
  }

  void toBf16(FloatBuffer src, ShortBuffer dst) {
    parallel.forRange(
        src.capacity(),
        GRAIN,
        (from, to) -> {
          float[] in = new float[BLOCK];
          short[] out = new short[BLOCK];
          for (int start = from; start < to; start += BLOCK) {
            int len = Math.min(BLOCK, to - start);
            src.get(start, in, 0, len);
            for (int i = 0; i < len; i++) {
              out[i] = Bf16.fromFloat(in[i]);
            }
            dst.put(start, out, 0, len);
          }
        });
  }

  void fromBf16(ShortBuffer src, FloatBuffer dst) {
    parallel.forRange(
        src.capacity(),
        GRAIN,
        (from, to) -> {
          short[] in = new short[BLOCK];
          float[] out = new float[BLOCK];
          for (int start = from; start < to; start += BLOCK) {
            int len = Math.min(BLOCK, to - start);
            src.get(start, in, 0, len);
            for (int i = 0; i < len; i++) {
              out[i] = Bf16.toFloat(in[i]);
            }
            dst.put(start, out, 0, len);
          }
        });
  }
}
