package dev.ramtrain.trainer.backend;

/**
 * The argument checks every backend makes before it enqueues work, in the caller's thread (an error
 * in enqueued work would surface only at the next synchronize, far from its cause): element counts,
 * matrix shapes and strides, byte ranges, convolution windows. The CPU backend and the CUDA backend
 * share them, so both reject the same calls with the same messages.
 */
public final class ArgumentChecks {
  private ArgumentChecks() {}

  /** The operands of {@link Backend#gemm}: op(A) is m x k, op(B) k x n, C m x n. */
  public static void checkGemm(
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      DeviceBuffer a,
      int lda,
      DeviceBuffer b,
      int ldb,
      DeviceBuffer c,
      int ldc) {
    checkMatrix(a, transA ? k : m, transA ? m : k, lda);
    checkMatrix(b, transB ? n : k, transB ? k : n, ldb);
    checkMatrix(c, m, n, ldc);
  }

  /** The operands of {@link Backend#gemmStridedBatched}: {@code count} GEMMs at fixed strides. */
  public static void checkGemmStridedBatched(
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      DeviceBuffer a,
      int lda,
      long strideA,
      DeviceBuffer b,
      int ldb,
      long strideB,
      DeviceBuffer c,
      int ldc,
      long strideC,
      int count) {
    if (count < 1 || strideA < 0 || strideB < 0 || strideC < 0) {
      throw new IllegalArgumentException(
          "batched GEMM: count " + count + ", strides " + strideA + "/" + strideB + "/" + strideC);
    }
    checkBatch(a, transA ? k : m, transA ? m : k, lda, strideA, count);
    checkBatch(b, transB ? n : k, transB ? k : n, ldb, strideB, count);
    checkBatch(c, m, n, ldc, strideC, count);
  }

  /** The output size of a window of {@code k} with {@code stride} over {@code size} + padding. */
  public static int convOut(int size, int k, int stride, int pad) {
    if (stride < 1 || k < 1 || size + 2 * pad < k) {
      throw new IllegalArgumentException(
          "a "
              + k
              + "-wide window with stride "
              + stride
              + " and padding "
              + pad
              + " does not fit "
              + size);
    }
    return (size + 2 * pad - k) / stride + 1;
  }

  public static void checkCount(DeviceBuffer x, long expected) {
    if (x.count() != expected) {
      throw new IllegalArgumentException(
          x.label() + " has " + x.count() + " elements, expected " + expected);
    }
  }

  public static void checkMatrix(DeviceBuffer x, int rows, int cols, int ld) {
    if (ld < cols) {
      throw new IllegalArgumentException(
          x.label() + ": leading dimension " + ld + " < " + cols + " columns");
    }
    long needed = rows == 0 ? 0 : (long) (rows - 1) * ld + cols;
    if (x.count() < needed) {
      throw new IllegalArgumentException(
          x.label()
              + " has "
              + x.count()
              + " elements, a "
              + rows
              + "x"
              + cols
              + " matrix with stride "
              + ld
              + " needs "
              + needed);
    }
  }

  public static void checkBatch(
      DeviceBuffer x, int rows, int cols, int ld, long stride, int count) {
    checkMatrix(x, rows, cols, ld);
    long needed = (count - 1) * stride + (rows == 0 ? 0 : (long) (rows - 1) * ld + cols);
    if (x.count() < needed) {
      throw new IllegalArgumentException(
          x.label()
              + " has "
              + x.count()
              + " elements, "
              + count
              + " matrices "
              + rows
              + "x"
              + cols
              + " with stride "
              + stride
              + " need "
              + needed);
    }
  }

  /** Elements [offset, offset + length) of a buffer of {@code count} elements. */
  public static void checkView(String label, long offset, long length, long count) {
    if (offset < 0 || length < 0 || offset + length > count) {
      throw new IndexOutOfBoundsException(
          label + ": view [" + offset + ", " + (offset + length) + ") of " + count + " elements");
    }
  }

  /**
   * {@code length} elements of {@code type} at byte {@code offset} of a buffer of {@code bytes}.
   */
  public static void checkViewAs(String label, DType type, long offset, long length, long bytes) {
    if (offset < 0
        || length < 0
        || offset % type.bytes() != 0
        || offset + length * type.bytes() > bytes) {
      throw new IndexOutOfBoundsException(
          label + ": " + length + " " + type + " at byte " + offset + " of " + bytes + " bytes");
    }
  }

  /** The two buffers of a device-to-device copy hold the same number of bytes. */
  public static void checkSameBytes(DeviceBuffer src, DeviceBuffer dst) {
    if (src.bytes() != dst.bytes()) {
      throw new IllegalArgumentException(
          "copy "
              + src.label()
              + " ("
              + src.bytes()
              + " bytes) to "
              + dst.label()
              + " ("
              + dst.bytes()
              + " bytes)");
    }
  }

  /**
   * {@link Backend#convert}'s operands: the same length, F32 to BF16 or back; true for F32 to BF16.
   */
  public static boolean checkConversion(DeviceBuffer src, DeviceBuffer dst) {
    checkCount(dst, src.count());
    if (src.dtype() == DType.F32 && dst.dtype() == DType.BF16) {
      return true;
    }
    if (src.dtype() == DType.BF16 && dst.dtype() == DType.F32) {
      return false;
    }
    throw new IllegalArgumentException(
        "convert "
            + src.label()
            + " ("
            + src.dtype()
            + ") to "
            + dst.label()
            + " ("
            + dst.dtype()
            + "): only F32 <-> BF16");
  }

  public static void checkRange(String label, long offset, long bytes, long size) {
    if (offset < 0 || bytes < 0 || offset + bytes > size) {
      throw new IndexOutOfBoundsException(
          label + ": bytes [" + offset + ", " + (offset + bytes) + ") of " + size);
    }
  }
}
