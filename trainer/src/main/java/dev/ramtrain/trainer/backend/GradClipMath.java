package dev.ramtrain.trainer.backend;

import java.nio.FloatBuffer;
import java.util.List;
import java.util.function.DoubleUnaryOperator;
import java.util.function.IntConsumer;

/**
 * Gradient-norm clipping's arithmetic (torch.nn.utils.clip_grad_norm_'s), shared by the CPU
 * backend's kernel, the offloaded trainer's host step and the CUDA kernel (optim.cu). The squares
 * are summed in double per fixed chunk, each chunk the way a GPU block sums it: {@link #LANES}
 * strided lanes, then a pairwise tree over the lanes; the chunks are added in order. So the norm
 * depends neither on the thread count nor on the device, and all three give the same bits.
 */
public final class GradClipMath {
  private static final int GRAIN = 1 << 14;

  /** Threads of the CUDA block that sums a chunk (RT_BLOCK): lane t sums elements t, t + LANES… */
  public static final int LANES = 256;

  private GradClipMath() {}

  /** How many chunks a slab of {@code n} gradients is summed in. */
  public static int chunks(int n) {
    return Math.max(1, Math.min(64, n / GRAIN));
  }

  /**
   * Gradients [from, from + count) as a buffer indexed from 0: how a host slab over 2 GiB, which no
   * one Java buffer views, is clipped ({@code HostBuffer::floats}).
   */
  @FunctionalInterface
  public interface Views {
    FloatBuffer of(int from, int count);
  }

  /** Views of one buffer. */
  public static Views views(FloatBuffer grads) {
    return grads::slice;
  }

  /** The sum of squares of chunk {@code c} of {@code chunks(n)}. */
  public static double chunkSumOfSquares(FloatBuffer grads, int c, int n) {
    return chunkSumOfSquares(views(grads), c, n);
  }

  /** The same, the chunk read through its own view. */
  public static double chunkSumOfSquares(Views grads, int c, int n) {
    int size = (n + chunks(n) - 1) / chunks(n);
    int from = c * size;
    int to = Math.min(n, from + size);
    FloatBuffer chunk = grads.of(from, to - from);
    double[] lanes = new double[LANES];
    for (int i = 0; i < to - from; i++) {
      double g = chunk.get(i);
      lanes[i % LANES] += g * g;
    }
    for (int half = LANES / 2; half > 0; half /= 2) {
      for (int t = 0; t < half; t++) {
        lanes[t] += lanes[t + half];
      }
    }
    return lanes[0];
  }

  /** The L2 norm from the chunks' sums, added in chunk order. */
  public static float norm(double[] chunkSums) {
    return (float) Math.sqrt(total(chunkSums));
  }

  /**
   * The chunks' sums added in chunk order, as {@link #norm} adds them: a rank's share's sum of
   * squares, which the ranks' shares sum to the norm's (ZeRO).
   */
  public static double total(double[] chunkSums) {
    double total = 0;
    for (double p : chunkSums) {
      total += p;
    }
    return total;
  }

  /** Multiplies gradients [from, to) by {@code scale}. */
  public static void scale(FloatBuffer grads, float scale, int from, int to) {
    for (int i = from; i < to; i++) {
      grads.put(i, grads.get(i) * scale);
    }
  }

  /** Runs a body for each of {@code count} blocks, in any order, on whichever threads it has. */
  @FunctionalInterface
  public interface Blocks {
    void forEach(int count, IntConsumer block);
  }

  /** {@link Blocks} on the calling thread. */
  public static final Blocks SERIAL =
      (count, block) -> {
        for (int b = 0; b < count; b++) {
          block.accept(b);
        }
      };

  /**
   * Clips host gradients {@code g} to {@code maxNorm} in place, as the resident kernel does: the
   * {@code frozen} ranges ({from, count}) zeroed first (timm computes no gradient for them: out of
   * the norm), the chunks' squares summed, and their {@link #total} passed through {@code
   * overRanks} (ZeRO: the ranks' shares' sums added; else the identity) before the root. Returns
   * the norm. The bits depend on neither {@code blocks}' threads nor their order.
   */
  public static float clip(
      FloatBuffer g,
      List<long[]> frozen,
      float maxNorm,
      DoubleUnaryOperator overRanks,
      Blocks blocks) {
    return clip(views(g), g.capacity(), frozen, maxNorm, overRanks, blocks);
  }

  /** The same over {@code n} gradients read through views, a block of them at a time. */
  public static float clip(
      Views g,
      int n,
      List<long[]> frozen,
      float maxNorm,
      DoubleUnaryOperator overRanks,
      Blocks blocks) {
    for (long[] range : frozen) {
      int from = (int) range[0];
      int to = from + (int) range[1];
      blocks.forEach(
          (to - from + GRAIN - 1) / GRAIN,
          b -> {
            int start = from + b * GRAIN;
            FloatBuffer block = g.of(start, Math.min(to, start + GRAIN) - start);
            for (int i = 0; i < block.capacity(); i++) {
              block.put(i, 0f); // zero, as the device's Fill: a NaN times 0 would stay NaN
            }
          });
    }
    double[] sums = new double[chunks(n)];
    blocks.forEach(sums.length, c -> sums[c] = chunkSumOfSquares(g, c, n));
    float norm = (float) Math.sqrt(overRanks.applyAsDouble(total(sums)));
    float factor = scale(maxNorm, norm);
    if (factor < 1) {
      blocks.forEach(
          (n + GRAIN - 1) / GRAIN,
          b -> {
            int start = b * GRAIN;
            FloatBuffer block = g.of(start, Math.min(n, start + GRAIN) - start);
            scale(block, factor, 0, block.capacity());
          });
    }
    return norm;
  }

  /** The factor gradients are multiplied by, or 1 when the norm is within {@code maxNorm}. */
  public static float scale(float maxNorm, float norm) {
    float coef = maxNorm / (norm + 1e-6f);
    return maxNorm > 0 && coef < 1 ? coef : 1f;
  }
}
