package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkBatch;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireGemmOperand;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.Operation;

/**
 * {@code count} GEMMs as {@link Gemm} (A and B F32 or BF16, C F32), the i-th on A, B and C offset
 * by {@code i * stride} elements (as cublasSgemmStridedBatched): a stride of 0 shares that matrix
 * across the batch. With {@code strideC == 0} the products are summed into the one C: {@code C =
 * beta * C + alpha * Σ op(A_i) op(B_i)} (a convolution's weight gradient over the images of a
 * batch).
 */
public record GemmStridedBatched(
    int m,
    int n,
    int k,
    float alpha,
    GemmOperand opA,
    GemmOperand opB,
    float beta,
    GemmOperand opC,
    int count)
    implements Operation, BlasOperands {
  public GemmStridedBatched {
    if (count < 1 || opC.transpose()) {
      throw new IllegalArgumentException(
          "batched GEMM: count " + count + (opC.transpose() ? ", C transposed" : ""));
    }
    checkBatch(
        opA.buffer(),
        opA.transpose() ? k : m,
        opA.transpose() ? m : k,
        opA.ld(),
        opA.stride(),
        count);
    checkBatch(
        opB.buffer(),
        opB.transpose() ? n : k,
        opB.transpose() ? k : n,
        opB.ld(),
        opB.stride(),
        count);
    checkBatch(opC.buffer(), m, n, opC.ld(), opC.stride(), count);
    requireGemmOperand(opA.buffer());
    requireGemmOperand(opB.buffer());
    requireType(opC.buffer(), DType.F32);
  }

  /** Whether every item's product is summed into the one C (a stride of 0 for C). */
  public boolean sumsIntoOneC() {
    return opC.stride() == 0;
  }

  /** {@code gemm} as a batch of one: engines with one kernel for both launch it so. */
  public static GemmStridedBatched of(Gemm gemm) {
    return new GemmStridedBatched(
        gemm.m(),
        gemm.n(),
        gemm.k(),
        gemm.alpha(),
        gemm.opA(),
        gemm.opB(),
        gemm.beta(),
        gemm.opC(),
        1);
  }

  public long strideA() {
    return opA.stride();
  }

  public long strideB() {
    return opB.stride();
  }

  public long strideC() {
    return opC.stride();
  }
}
