package dev.ramtrain.trainer.backend.cpu;

import java.nio.FloatBuffer;
import java.util.Arrays;

/**
 * Layer normalization and row softmax on the CPU: the reference arithmetic the CUDA kernels
 * (norm.cu) repeat expression for expression, in double with the same summation order, so the two
 * engines agree to the bit wherever exp is not involved. A group of layer norm is {@code size}
 * values {@code inner} apart; blocks of one outer index are read whole, so both the last-dimension
 * case (inner 1) and the channels of NCHW (inner h·w) stream through memory in order.
 */
final class NormKernels {
  /** Lanes a feature's parameter gradient is summed in (norm.cu's RT_LN_LANES). */
  static final int LANES = 16;

  private static final int GRAIN = 1 << 15;

  private final Parallel parallel;

  NormKernels(Parallel parallel) {
    this.parallel = parallel;
  }

  void layerNorm(
      FloatBuffer x,
      int outer,
      int size,
      int inner,
      FloatBuffer gamma,
      FloatBuffer beta,
      float eps,
      FloatBuffer y,
      FloatBuffer savedMean,
      FloatBuffer savedInvStd) {
    int block = size * inner;
    float[] g = array(gamma, size);
    float[] b = array(beta, size);
    parallel.forRange(
        outer,
        Math.max(1, GRAIN / block),
        (from, to) -> {
          float[] v = new float[block];
          double[] mean = new double[inner];
          double[] invStd = new double[inner];
          for (int o = from; o < to; o++) {
            x.get(o * block, v);
            Arrays.fill(mean, 0);
            Arrays.fill(invStd, 0);
            for (int j = 0; j < size; j++) {
              for (int i = 0; i < inner; i++) {
                mean[i] += v[j * inner + i];
              }
            }
            for (int i = 0; i < inner; i++) {
              mean[i] /= size;
            }
            for (int j = 0; j < size; j++) { // the squares, summed into invStd
              for (int i = 0; i < inner; i++) {
                double d = v[j * inner + i] - mean[i];
                invStd[i] += d * d;
              }
            }
            for (int i = 0; i < inner; i++) {
              invStd[i] = 1 / Math.sqrt(invStd[i] / size + eps);
              savedMean.put(o * inner + i, (float) mean[i]);
              savedInvStd.put(o * inner + i, (float) invStd[i]);
            }
            for (int j = 0; j < size; j++) {
              for (int i = 0; i < inner; i++) {
                int at = j * inner + i;
                v[at] = (float) ((v[at] - mean[i]) * invStd[i] * g[j] + b[j]);
              }
            }
            y.put(o * block, v);
          }
        });
  }

  void layerNormBackward(
      FloatBuffer x,
      FloatBuffer dy,
      int outer,
      int size,
      int inner,
      FloatBuffer gamma,
      FloatBuffer savedMean,
      FloatBuffer savedInvStd,
      FloatBuffer dgamma,
      FloatBuffer dbeta,
      FloatBuffer dx) {
    int block = size * inner;
    float[] g = array(gamma, size);
    parallel.forRange(
        outer,
        Math.max(1, GRAIN / block),
        (from, to) -> {
          float[] v = new float[block];
          float[] d = new float[block];
          double[] sumG = new double[inner];
          double[] sumGXhat = new double[inner];
          for (int o = from; o < to; o++) {
            x.get(o * block, v);
            dy.get(o * block, d);
            Arrays.fill(sumG, 0);
            Arrays.fill(sumGXhat, 0);
            for (int j = 0; j < size; j++) {
              for (int i = 0; i < inner; i++) {
                int at = j * inner + i;
                double xhat = xhat(v[at], savedMean, savedInvStd, o * inner + i);
                double gy = (double) d[at] * g[j];
                sumG[i] += gy;
                sumGXhat[i] += gy * xhat;
              }
            }
            for (int j = 0; j < size; j++) {
              for (int i = 0; i < inner; i++) {
                int at = j * inner + i;
                double xhat = xhat(v[at], savedMean, savedInvStd, o * inner + i);
                double gy = (double) d[at] * g[j];
                double invStd = savedInvStd.get(o * inner + i);
                d[at] = (float) (invStd * (gy - sumG[i] / size - xhat * (sumGXhat[i] / size)));
              }
            }
            dx.put(o * block, d);
          }
        });
    // dgamma and dbeta: each j sums over every group r = o * inner + i in the CUDA kernel's order:
    // lane l the groups r ≡ l (mod LANES) in increasing order, then the lanes in lane order.
    parallel.forRange(
        size,
        Math.max(1, GRAIN / Math.max(1, outer * inner)),
        (from, to) -> {
          int span = (to - from) * inner;
          float[] v = new float[span];
          float[] d = new float[span];
          double[] laneDyXhat = new double[(to - from) * LANES];
          double[] laneDy = new double[(to - from) * LANES];
          for (int o = 0; o < outer; o++) {
            x.get((o * size + from) * inner, v);
            dy.get((o * size + from) * inner, d);
            for (int j = 0; j < to - from; j++) {
              for (int i = 0; i < inner; i++) {
                int at = j * inner + i;
                int r = o * inner + i;
                int lane = j * LANES + r % LANES;
                laneDyXhat[lane] += d[at] * xhat(v[at], savedMean, savedInvStd, r);
                laneDy[lane] += d[at];
              }
            }
          }
          for (int j = 0; j < to - from; j++) {
            double sumDyXhat = 0;
            double sumDy = 0;
            for (int lane = j * LANES; lane < (j + 1) * LANES; lane++) {
              sumDyXhat += laneDyXhat[lane];
              sumDy += laneDy[lane];
            }
            dgamma.put(from + j, (float) (dgamma.get(from + j) + sumDyXhat));
            dbeta.put(from + j, (float) (dbeta.get(from + j) + sumDy));
          }
        });
  }

  private static double xhat(float v, FloatBuffer mean, FloatBuffer invStd, int group) {
    return ((double) v - mean.get(group)) * invStd.get(group);
  }

  void softmax(FloatBuffer x, int rows, int cols, FloatBuffer y) {
    parallel.forRange(
        rows,
        Math.max(1, GRAIN / cols),
        (from, to) -> {
          float[] row = new float[cols];
          for (int r = from; r < to; r++) {
            x.get(r * cols, row);
            float max = Float.NEGATIVE_INFINITY;
            for (float v : row) {
              max = Math.max(max, v);
            }
            double sum = 0;
            for (float v : row) {
              sum += Math.exp((double) v - max);
            }
            for (int c = 0; c < cols; c++) {
              row[c] = (float) (Math.exp((double) row[c] - max) / sum);
            }
            y.put(r * cols, row);
          }
        });
  }

  void softmaxBackward(FloatBuffer y, FloatBuffer dy, int rows, int cols, FloatBuffer dx) {
    parallel.forRange(
        rows,
        Math.max(1, GRAIN / cols),
        (from, to) -> {
          float[] p = new float[cols];
          float[] g = new float[cols];
          for (int r = from; r < to; r++) {
            y.get(r * cols, p);
            dy.get(r * cols, g);
            double dot = 0;
            for (int c = 0; c < cols; c++) {
              dot += (double) g[c] * p[c];
            }
            for (int c = 0; c < cols; c++) {
              g[c] = (float) (p[c] * (g[c] - dot));
            }
            dx.put(r * cols, g);
          }
        });
  }

  private static float[] array(FloatBuffer values, int count) {
    float[] out = new float[count];
    values.get(0, out);
    return out;
  }
}
