package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkMatrix;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireGemmOperand;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * {@code C = alpha * op(A) * op(B) + beta * C}: op(A) is m×k, op(B) is k×n, C is m×n; {@code
 * lda/ldb/ldc} are the row strides of A, B and C as stored. C is F32; A and B may each be F32 or
 * BF16 (bf16 storage, fp32 accumulation: what streamed bf16 weights multiply with).
 */
public record Gemm(
    boolean transA,
    boolean transB,
    int m,
    int n,
    int k,
    float alpha,
    DeviceBuffer a,
    int lda,
    DeviceBuffer b,
    int ldb,
    float beta,
    DeviceBuffer c,
    int ldc)
    implements Operation {
  public Gemm {
    checkMatrix(a, transA ? k : m, transA ? m : k, lda);
    checkMatrix(b, transB ? n : k, transB ? k : n, ldb);
    checkMatrix(c, m, n, ldc);
    requireGemmOperand(a);
    requireGemmOperand(b);
    requireType(c, DType.F32);
  }
}
