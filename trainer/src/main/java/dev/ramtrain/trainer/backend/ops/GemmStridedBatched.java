package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkBatch;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireGemmOperand;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * {@code count} GEMMs as {@link Gemm} (A and B F32 or BF16, C F32), the i-th on A, B and C offset
 * by {@code i * stride} elements (as cublasSgemmStridedBatched): a stride of 0 shares that matrix
 * across the batch. With {@code strideC == 0} the products are summed into the one C: {@code C =
 * beta * C + alpha * Σ op(A_i) op(B_i)} (a convolution's weight gradient over the images of a
 * batch).
 */
public record GemmStridedBatched(
    boolean transA,
    boolean transB,
    int m,
    int n,
    int k,
    float alpha,
    DeviceBuffer a,
    int lda,
    long strideA,
    DeviceBuffer b,
    int ldb,
    long strideB,
    float beta,
    DeviceBuffer c,
    int ldc,
    long strideC,
    int count)
    implements Operation {
  public GemmStridedBatched {
    if (count < 1 || strideA < 0 || strideB < 0 || strideC < 0) {
      throw new IllegalArgumentException(
          "batched GEMM: count " + count + ", strides " + strideA + "/" + strideB + "/" + strideC);
    }
    checkBatch(a, transA ? k : m, transA ? m : k, lda, strideA, count);
    checkBatch(b, transB ? n : k, transB ? k : n, ldb, strideB, count);
    checkBatch(c, m, n, ldc, strideC, count);
    requireGemmOperand(a);
    requireGemmOperand(b);
    requireType(c, DType.F32);
  }

  /** Whether every item's product is summed into the one C (a stride of 0 for C). */
  public boolean sumsIntoOneC() {
    return strideC == 0;
  }

  /** {@code gemm} as a batch of one: engines with one kernel for both launch it so. */
  public static GemmStridedBatched of(Gemm gemm) {
    return new GemmStridedBatched(
        gemm.transA(),
        gemm.transB(),
        gemm.m(),
        gemm.n(),
        gemm.k(),
        gemm.alpha(),
        gemm.a(),
        gemm.lda(),
        0,
        gemm.b(),
        gemm.ldb(),
        0,
        gemm.beta(),
        gemm.c(),
        gemm.ldc(),
        0,
        1);
  }
}
