package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkMatrix;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireGemmOperand;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.Operation;

/**
 * {@code C = alpha * op(A) * op(B) + beta * C}: op(A) is m×k, op(B) is k×n, C is m×n, each operand
 * as stored ({@link GemmOperand}: row stride, transposed or not). C is F32 and not transposed; A
 * and B may each be F32 or BF16 (bf16 storage, fp32 accumulation: what streamed bf16 weights
 * multiply with).
 */
public record Gemm(
    int m, int n, int k, float alpha, GemmOperand opA, GemmOperand opB, float beta, GemmOperand opC)
    implements Operation, BlasOperands {
  public Gemm {
    if (opA.stride() != 0 || opB.stride() != 0 || opC.stride() != 0 || opC.transpose()) {
      throw new IllegalArgumentException(
          "GEMM: strides are a batch's (GemmStridedBatched), and C is not transposed");
    }
    checkMatrix(opA.buffer(), opA.transpose() ? k : m, opA.transpose() ? m : k, opA.ld());
    checkMatrix(opB.buffer(), opB.transpose() ? n : k, opB.transpose() ? k : n, opB.ld());
    checkMatrix(opC.buffer(), m, n, opC.ld());
    requireGemmOperand(opA.buffer());
    requireGemmOperand(opB.buffer());
    requireType(opC.buffer(), DType.F32);
  }
}
