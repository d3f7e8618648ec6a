package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.ColumnSumOrder;
import java.nio.FloatBuffer;
import java.util.Arrays;

/**
 * Layer normalization and row softmax on the CPU: the reference arithmetic the CUDA kernels
 * (norm.cu) repeat expression for expression, in double with the same summation order, so the two
 * engines agree to the bit wherever exp is not involved. A row (a group of layer norm) is summed as
 * a warp sums it: lane l the elements j ≡ l (mod {@link #ROW_LANES}) in order, then the lanes in
 * lane order. A group of layer norm is {@code size} values {@code inner} apart; blocks of one outer
 * index are read whole, so both the last-dimension case (inner 1) and the channels of NCHW (inner
 * h·w) stream through memory in order.
 */
final class NormKernels {
  /** Lanes a row is summed in (RT_ROW_LANES: a warp). */
  static final int ROW_LANES = 32;

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
          double[] lanes = new double[ROW_LANES * inner]; // [lane][i]
          for (int o = from; o < to; o++) {
            x.get(o * block, v);
            Arrays.fill(lanes, 0);
            for (int j = 0; j < size; j++) {
              int lane = (j % ROW_LANES) * inner;
              for (int i = 0; i < inner; i++) {
                lanes[lane + i] += v[j * inner + i];
              }
            }
            laneTotals(lanes, inner, mean);
            for (int i = 0; i < inner; i++) {
              mean[i] /= size;
            }
            Arrays.fill(lanes, 0);
            for (int j = 0; j < size; j++) { // the squares
              int lane = (j % ROW_LANES) * inner;
              for (int i = 0; i < inner; i++) {
                double d = v[j * inner + i] - mean[i];
                lanes[lane + i] += d * d;
              }
            }
            laneTotals(lanes, inner, invStd);
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
          double[] lanesG = new double[ROW_LANES * inner]; // [lane][i]
          double[] lanesGXhat = new double[ROW_LANES * inner];
          for (int o = from; o < to; o++) {
            x.get(o * block, v);
            dy.get(o * block, d);
            Arrays.fill(lanesG, 0);
            Arrays.fill(lanesGXhat, 0);
            for (int j = 0; j < size; j++) {
              int lane = (j % ROW_LANES) * inner;
              for (int i = 0; i < inner; i++) {
                int at = j * inner + i;
                double xhat = xhat(v[at], savedMean, savedInvStd, o * inner + i);
                double gy = (double) d[at] * g[j];
                lanesG[lane + i] += gy;
                lanesGXhat[lane + i] += gy * xhat;
              }
            }
            laneTotals(lanesG, inner, sumG);
            laneTotals(lanesGXhat, inner, sumGXhat);
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
    // dgamma and dbeta: each j sums over every group r = o * inner + i in ColumnSumOrder's order,
    // as the CUDA kernels do: lane l the groups r ≡ l (mod lanes) in increasing order, each row
    // group's 16 lanes in lane order, then the row groups.
    int rowGroups = ColumnSumOrder.groups((long) outer * inner, size);
    int lanes = ColumnSumOrder.LANES * rowGroups;
    parallel.forRange(
        size,
        Math.max(1, GRAIN / Math.max(1, outer * inner)),
        (from, to) -> {
          int span = (to - from) * inner;
          float[] v = new float[span];
          float[] d = new float[span];
          double[] laneDyXhat = new double[(to - from) * lanes]; // [feature][lane]
          double[] laneDy = new double[(to - from) * lanes];
          for (int o = 0; o < outer; o++) {
            x.get((o * size + from) * inner, v);
            dy.get((o * size + from) * inner, d);
            for (int j = 0; j < to - from; j++) {
              for (int i = 0; i < inner; i++) {
                int at = j * inner + i;
                int r = o * inner + i;
                int lane = j * lanes + r % lanes;
                laneDyXhat[lane] += d[at] * xhat(v[at], savedMean, savedInvStd, r);
                laneDy[lane] += d[at];
              }
            }
          }
          for (int j = 0; j < to - from; j++) {
            double sumDyXhat = ColumnSumOrder.total(laneDyXhat, 1, j * lanes, rowGroups);
            double sumDy = ColumnSumOrder.total(laneDy, 1, j * lanes, rowGroups);
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
          double[] lanes = new double[ROW_LANES];
          for (int r = from; r < to; r++) {
            x.get(r * cols, row);
            float max = Float.NEGATIVE_INFINITY;
            for (float v : row) {
              max = Math.max(max, v);
            }
            Arrays.fill(lanes, 0);
            for (int c = 0; c < cols; c++) {
              lanes[c % ROW_LANES] += Math.exp((double) row[c] - max);
            }
            double sum = rowTotal(lanes);
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
          double[] lanes = new double[ROW_LANES];
          for (int r = from; r < to; r++) {
            y.get(r * cols, p);
            dy.get(r * cols, g);
            Arrays.fill(lanes, 0);
            for (int c = 0; c < cols; c++) {
              lanes[c % ROW_LANES] += (double) g[c] * p[c];
            }
            double dot = rowTotal(lanes);
            for (int c = 0; c < cols; c++) {
              g[c] = (float) (p[c] * (g[c] - dot));
            }
            dx.put(r * cols, g);
          }
        });
  }

  /** Each i's total of its lanes ({@code lanes} as [lane][i]), added in lane order from 0. */
  private static void laneTotals(double[] lanes, int inner, double[] totals) {
    Arrays.fill(totals, 0);
    for (int lane = 0; lane < ROW_LANES; lane++) {
      for (int i = 0; i < inner; i++) {
        totals[i] += lanes[lane * inner + i];
      }
    }
  }

  /** A row's lanes added in lane order from 0. */
  private static double rowTotal(double[] lanes) {
    double total = 0;
    for (double lane : lanes) {
      total += lane;
    }
    return total;
  }

  private static float[] array(FloatBuffer values, int count) {
    float[] out = new float[count];
    values.get(0, out);
    return out;
  }
}
