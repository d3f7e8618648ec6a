package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.openblas.global.openblas_nolapack.CblasRowMajor;
import static org.bytedeco.openblas.global.openblas_nolapack.cblas_sgemm;

import org.bytedeco.javacpp.FloatPointer;

/**
 * A strided batch of GEMMs on the CPU: one multithreaded OpenBLAS call after another. Splitting the
 * batch across Java threads, each calling OpenBLAS concurrently, was measured slower inside a
 * training step (OpenBLAS's own threads then compete with the callers for the two cores), although
 * faster in isolation; see benchmarks/RESULTS.md. A sum into one C ({@code strideC == 0})
 * accumulates in place: beta for the first product, 1 after.
 */
record BatchedGemm(
    int transA,
    int transB,
    int m,
    int n,
    int k,
    float alpha,
    int lda,
    long strideA,
    int ldb,
    long strideB,
    float beta,
    int ldc,
    long strideC,
    int count) {

  void run(FloatPointer a, FloatPointer b, FloatPointer c) {
    FloatPointer ai = new FloatPointer(a);
    FloatPointer bi = new FloatPointer(b);
    FloatPointer ci = new FloatPointer(c);
    for (int i = 0; i < count; i++) {
      cblas_sgemm(
          CblasRowMajor,
          transA,
          transB,
          m,
          n,
          k,
          alpha,
          ai.position(a.position() + i * strideA),
          lda,
          bi.position(b.position() + i * strideB),
          ldb,
          strideC == 0 && i > 0 ? 1f : beta,
          ci.position(c.position() + i * strideC),
          ldc);
    }
  }
}
