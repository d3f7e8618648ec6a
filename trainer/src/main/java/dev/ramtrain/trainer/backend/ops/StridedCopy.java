package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * {@code dst[i·d0 + j·d1 + k·d2] = src[i·s0 + j·s1 + k·s2]} over an {@code n0×n1×n2} index space
 * (or {@code +=} when {@code accumulate}): transposes, slices and broadcasts as strided views, such
 * as a patch embedding's [channels, positions] to a transformer's [tokens, features] one row down,
 * or a position embedding added to every sample (source stride 0 over the batch). Each (j, k) walks
 * i in order, so accumulating with {@code d0 == 0} sums over i deterministically: the gradient of
 * such a broadcast. Offsets are the views' ({@link DeviceBuffer#view}). {@link #repeated} adds a
 * fourth index, in parallel like j and k: attention's [batch, tokens, heads, headDim] rows to its
 * [batch, heads, tokens, headDim] blocks in one call.
 */
public record StridedCopy(
    DeviceBuffer src,
    Strides srcStrides,
    DeviceBuffer dst,
    Strides dstStrides,
    int n0,
    int n1,
    int n2,
    boolean accumulate,
    Repeat repeat)
    implements Operation {

  /**
   * The copy done {@code times} times, the r-th {@code srcStep} and {@code dstStep} elements
   * further along its buffers.
   */
  public record Repeat(int times, long srcStep, long dstStep) {
    /** The copy done once. */
    public static final Repeat ONCE = new Repeat(1, 0, 0);

    public Repeat {
      if (times < 1 || srcStep < 0 || dstStep < 0) {
        throw new IllegalArgumentException("a strided copy repeated " + this);
      }
    }
  }

  /** Element strides of the three indices. */
  public record Strides(long s0, long s1, long s2) {
    public Strides {
      if (s0 < 0 || s1 < 0 || s2 < 0) {
        throw new IllegalArgumentException("negative stride in " + this);
      }
    }

    /** The contiguous [n0, n1, n2] layout. */
    public static Strides dense(int n1, int n2) {
      return new Strides((long) n1 * n2, n2, 1);
    }

    long last(int n0, int n1, int n2) {
      return (n0 - 1) * s0 + (n1 - 1) * s1 + (n2 - 1) * s2;
    }
  }

  /** One copy over the n0×n1×n2 index space. */
  public StridedCopy(
      DeviceBuffer src,
      Strides srcStrides,
      DeviceBuffer dst,
      Strides dstStrides,
      int n0,
      int n1,
      int n2,
      boolean accumulate) {
    this(src, srcStrides, dst, dstStrides, n0, n1, n2, accumulate, Repeat.ONCE);
  }

  public StridedCopy {
    if (n0 < 0 || n1 < 0 || n2 < 0) {
      throw new IllegalArgumentException("strided copy over " + n0 + "x" + n1 + "x" + n2);
    }
    requireType(src, DType.F32);
    requireType(dst, DType.F32);
    if ((long) n0 * n1 * n2 > 0) {
      long more = repeat.times() - 1L;
      within(src, srcStrides.last(n0, n1, n2) + more * repeat.srcStep());
      within(dst, dstStrides.last(n0, n1, n2) + more * repeat.dstStep());
    }
    // Two (r, j, k) writing one element would race on a GPU: only i may share a destination.
    if (repeat.times() > 1 && repeat.dstStep() == 0) {
      throw new IllegalArgumentException(
          dst.label() + ": " + repeat.times() + " repeats onto one destination");
    }
    if ((n1 > 1 && dstStrides.s1() == 0) || (n2 > 1 && dstStrides.s2() == 0)) {
      throw new IllegalArgumentException(
          dst.label() + ": destination stride 0 on an inner index " + dstStrides);
    }
    if (!accumulate && n0 > 1 && dstStrides.s0() == 0) {
      throw new IllegalArgumentException(
          dst.label() + ": " + n0 + " copies onto one destination without accumulate");
    }
  }

  /** This copy done {@code times} times, each {@code srcStep} and {@code dstStep} further. */
  public StridedCopy repeated(int times, long srcStep, long dstStep) {
    return new StridedCopy(
        src,
        srcStrides,
        dst,
        dstStrides,
        n0,
        n1,
        n2,
        accumulate,
        new Repeat(times, srcStep, dstStep));
  }

  private static void within(DeviceBuffer buffer, long lastIndex) {
    if (lastIndex >= buffer.count()) {
      throw new IllegalArgumentException(
          buffer.label()
              + " has "
              + buffer.count()
              + " elements, the strided copy reaches element "
              + lastIndex);
    }
  }
}
