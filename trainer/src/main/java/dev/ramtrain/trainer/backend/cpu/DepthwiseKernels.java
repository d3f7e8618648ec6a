package dev.ramtrain.trainer.backend.cpu;

import java.nio.FloatBuffer;

/**
 * The direct depthwise convolution ({@link dev.ramtrain.trainer.backend.ops.DepthwiseConvolution}):
 * the reference the CUDA kernels (conv.cu's depthwise_*) are tested against. Each output and each
 * input gradient sums its taps in row order in fp32, as the kernels do (so those two match them bit
 * for bit); each weight gradient sums its products in double. One image plane per task.
 */
final class DepthwiseKernels {
  private final Parallel parallel;

  DepthwiseKernels(Parallel parallel) {
    this.parallel = parallel;
  }

  /** y [n, h, w, c] = x [n, c, h, w] ⋆ weight [c, k, k], "same" padding. */
  void forward(
      FloatBuffer x, FloatBuffer weight, FloatBuffer y, int n, int c, int h, int w, int k) {
    int p = k / 2;
    parallel.forRange(
        n * c,
        1,
        (from, to) -> {
          float[] plane = new float[h * w];
          float[] taps = new float[k * k];
          for (int nc = from; nc < to; nc++) {
            int img = nc / c;
            int ch = nc % c;
            x.get(nc * h * w, plane);
            weight.get(ch * k * k, taps);
            for (int py = 0; py < h; py++) {
              for (int px = 0; px < w; px++) {
                float acc = 0f;
                for (int ky = 0; ky < k; ky++) {
                  int iy = py + ky - p;
                  if (iy < 0 || iy >= h) {
                    continue;
                  }
                  for (int kx = 0; kx < k; kx++) {
                    int ix = px + kx - p;
                    if (ix >= 0 && ix < w) {
                      acc += plane[iy * w + ix] * taps[ky * k + kx];
                    }
                  }
                }
                y.put(((img * h + py) * w + px) * c + ch, acc);
              }
            }
          }
        });
  }

  /** dx [n, c, h, w] = dy [n, h, w, c] ⋆ the flipped weight. */
  void backwardData(
      FloatBuffer dy, FloatBuffer weight, FloatBuffer dx, int n, int c, int h, int w, int k) {
    int p = k / 2;
    parallel.forRange(
        n * c,
        1,
        (from, to) -> {
          float[] taps = new float[k * k];
          for (int nc = from; nc < to; nc++) {
            int img = nc / c;
            int ch = nc % c;
            weight.get(ch * k * k, taps);
            for (int iy = 0; iy < h; iy++) {
              for (int ix = 0; ix < w; ix++) {
                float acc = 0f;
                for (int ky = 0; ky < k; ky++) {
                  int py = iy - ky + p;
                  if (py < 0 || py >= h) {
                    continue;
                  }
                  for (int kx = 0; kx < k; kx++) {
                    int px = ix - kx + p;
                    if (px >= 0 && px < w) {
                      acc += dy.get(((img * h + py) * w + px) * c + ch) * taps[ky * k + kx];
                    }
                  }
                }
                dx.put((nc * h + iy) * w + ix, acc);
              }
            }
          }
        });
  }

  /** weightGrad [c, k, k] += Σ over images and positions of x's tap times dy. */
  void backwardWeight(
      FloatBuffer x, FloatBuffer dy, FloatBuffer weightGrad, int n, int c, int h, int w, int k) {
    int p = k / 2;
    parallel.forRange(
        c * k * k,
        1,
        (from, to) -> {
          for (int t = from; t < to; t++) {
            int ch = t / (k * k);
            int ky = t % (k * k) / k;
            int kx = t % k;
            double sum = 0;
            for (int img = 0; img < n; img++) {
              for (int py = 0; py < h; py++) {
                int iy = py + ky - p;
                if (iy < 0 || iy >= h) {
                  continue;
                }
                for (int px = 0; px < w; px++) {
                  int ix = px + kx - p;
                  if (ix >= 0 && ix < w) {
                    sum +=
                        x.get(((img * c + ch) * h + iy) * w + ix)
                            * dy.get(((img * h + py) * w + px) * c + ch);
                  }
                }
              }
            }
            weightGrad.put(t, weightGrad.get(t) + (float) sum);
          }
        });
  }
}
