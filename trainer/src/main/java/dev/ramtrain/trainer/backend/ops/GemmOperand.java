package dev.ramtrain.trainer.backend.ops;

import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * One matrix of a GEMM as stored: its buffer, the row stride ({@code ld}, BLAS's leading dimension
 * in row-major order), the elements between the matrices of a strided batch ({@code stride}, 0 for
 * one matrix or one shared by the batch), and whether the GEMM multiplies its transpose (BLAS's
 * op(A)). Built as {@code GemmOperand.of(w, in).transposed()}, so a call names each matrix's layout
 * beside the matrix instead of in a row of positional numbers.
 */
public record GemmOperand(DeviceBuffer buffer, int ld, long stride, boolean transpose) {
  public GemmOperand {
    if (buffer == null) {
      throw new IllegalArgumentException("a GEMM operand needs a buffer");
    }
    if (stride < 0) {
      throw new IllegalArgumentException(
          buffer.label() + ": leading dimension " + ld + ", stride " + stride);
    }
  }

  /** {@code buffer} as a row-major matrix with rows {@code ld} elements apart. */
  public static GemmOperand of(DeviceBuffer buffer, int ld) {
    return new GemmOperand(buffer, ld, 0, false);
  }

  /** This matrix, multiplied transposed. */
  public GemmOperand transposed() {
    return new GemmOperand(buffer, ld, stride, true);
  }

  /** A batch of such matrices, {@code elements} apart. */
  public GemmOperand strided(long elements) {
    return new GemmOperand(buffer, ld, elements, transpose);
  }
}
