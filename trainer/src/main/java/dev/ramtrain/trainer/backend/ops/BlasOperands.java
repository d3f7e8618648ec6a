package dev.ramtrain.trainer.backend.ops;

import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * A GEMM's three operands, and the names BLAS gives their parts, which the engines read: {@link
 * Gemm} and {@link GemmStridedBatched} both are one.
 */
public interface BlasOperands {
  GemmOperand opA();

  GemmOperand opB();

  GemmOperand opC();

  default boolean transA() {
    return opA().transpose();
  }

  default boolean transB() {
    return opB().transpose();
  }

  default DeviceBuffer a() {
    return opA().buffer();
  }

  default DeviceBuffer b() {
    return opB().buffer();
  }

  default DeviceBuffer c() {
    return opC().buffer();
  }

  default int lda() {
    return opA().ld();
  }

  default int ldb() {
    return opB().ld();
  }

  default int ldc() {
    return opC().ld();
  }
}
