package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.openblas.global.openblas_nolapack.CblasNoTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasRowMajor;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.cblas_sgemm;

import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.javacpp.FloatPointer;

/**
 * Who multiplies fp32 matrices on the CPU backend, row-major as {@code cblas_sgemm}: {@code C =
 * alpha · op(A) · op(B) + beta · C}. OpenBLAS on the Java engine; oneDNN's on the oneDNN engine, so
 * that one threading runtime (its OpenMP threads) does all the heavy arithmetic.
 */
interface Sgemm {
  void sgemm(
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      FloatPointer a,
      int lda,
      FloatPointer b,
      int ldb,
      float beta,
      FloatPointer c,
      int ldc);

  /** OpenBLAS's cblas_sgemm, on the threads {@code blas_set_num_threads} gave it. */
  Sgemm OPENBLAS =
      (transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) ->
          cblas_sgemm(
              CblasRowMajor,
              transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans,
              m,
              n,
              k,
              alpha,
              a,
              lda,
              b,
              ldb,
              beta,
              c,
              ldc);

  /**
   * oneDNN's sgemm, on its OpenMP threads (its natives loaded: {@link OneDnn#open} has succeeded).
   * A failure, which only arguments the Gemm operations have checked could cause, is a status.
   */
  Sgemm ONEDNN =
      (transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) -> {
        int status =
            dnnl.dnnl_sgemm(
                (byte) (transA ? 'T' : 'N'),
                (byte) (transB ? 'T' : 'N'),
                m,
                n,
                k,
                alpha,
                a,
                lda,
                b,
                ldb,
                beta,
                c,
                ldc);
        if (status != dnnl.dnnl_success) {
          throw new IllegalStateException(
              "oneDNN sgemm " + m + "x" + n + "x" + k + " failed with status " + status);
        }
      };
}
