package dev.ramtrain.trainer.backend;

/**
 * The argument checks made before work is enqueued, in the caller's thread (an error in enqueued
 * work would surface only at the next synchronize, far from its cause): element counts and types,
 * matrix shapes and strides, byte ranges, convolution windows. The operations' records ({@code
 * backend.ops}) and the engines' copies use them, so every engine rejects the same calls with the
 * same messages.
 */
public final class ArgumentChecks {
  private ArgumentChecks() {}

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

  /**
   * The layout of an activation's channels: {@code block} 1 is NCHW, {@code c} is NHWC, another
   * power of two is oneDNN's nChw{block}c ([n][c/block][h][w][block]), which needs {@code c} to
   * divide by it.
   */
  public static void checkChannelBlock(int block, int c) {
    boolean blocked = Integer.bitCount(block) == 1 && c % block == 0;
    if (block < 1 || !(block == c || blocked)) {
      throw new IllegalArgumentException(
          c
              + " channels cannot be blocked by "
              + block
              + " (a power of two dividing them, or all of them)");
    }
  }

  /** For the engines that keep every activation NCHW: {@code block} must be 1. */
  public static void requirePlainChannels(int block, String what) {
    if (block != 1) {
      throw new IllegalArgumentException(
          what + " with channels blocked by " + block + " needs the oneDNN engine");
    }
  }

  /** A fused ReLU's mask, where given: bytes (U8). */
  public static void checkMask(DeviceBuffer mask) {
    if (mask != null && mask.dtype() != DType.U8) {
      throw new IllegalArgumentException(
          mask.label() + " is " + mask.dtype() + ", a ReLU mask is U8");
    }
  }

  /** For the engines that run batch norm's ReLU as an operation of its own. */
  public static void requireUnfused(DeviceBuffer reluMask, String what) {
    if (reluMask != null) {
      throw new IllegalArgumentException(
          what + " with a fused ReLU needs an engine that fuses them (Backend.normReluMaskBytes)");
    }
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

  /** {@code x} holds {@code expected} elements of F32. */
  public static void checkF32(DeviceBuffer x, long expected) {
    checkCount(x, expected);
    requireType(x, DType.F32);
  }

  public static void requireType(DeviceBuffer x, DType wanted) {
    if (x.dtype() != wanted) {
      throw new IllegalArgumentException(x.label() + " is " + x.dtype() + ", expected " + wanted);
    }
  }

  /** A GEMM multiplies F32 or BF16 operands (bf16 storage, fp32 accumulation). */
  public static void requireGemmOperand(DeviceBuffer x) {
    if (x.dtype() != DType.F32 && x.dtype() != DType.BF16) {
      throw new IllegalArgumentException(
          x.label() + " is " + x.dtype() + ", expected F32 or BF16 for a GEMM operand");
    }
  }

  /**
   * A convolution's multiplied operands (its input and weight, and in backward its output
   * gradient): {@code expected} elements, all F32 or all BF16 like {@code first}'s (bf16 storage,
   * fp32 accumulation).
   */
  public static void checkConvOperand(DeviceBuffer x, long expected, DeviceBuffer first) {
    checkCount(x, expected);
    requireGemmOperand(x);
    if (x.dtype() != first.dtype()) {
      throw new IllegalArgumentException(
          x.label()
              + " is "
              + x.dtype()
              + " where "
              + first.label()
              + " is "
              + first.dtype()
              + ": a convolution's operands are all F32 or all BF16");
    }
  }

  public static void checkRange(String label, long offset, long bytes, long size) {
    if (offset < 0 || bytes < 0 || offset + bytes > size) {
      throw new IndexOutOfBoundsException(
          label + ": bytes [" + offset + ", " + (offset + bytes) + ") of " + size);
    }
  }
}
