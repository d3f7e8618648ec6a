package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.openblas.global.openblas_nolapack.CblasNoTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasRowMajor;
import static org.bytedeco.openblas.global.openblas_nolapack.CblasTrans;
import static org.bytedeco.openblas.global.openblas_nolapack.cblas_sgemm;

import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import org.bytedeco.javacpp.FloatPointer;

/**
 * A strided batch of GEMMs on the CPU: one multithreaded OpenBLAS call after another. Splitting the
 * batch across Java threads, each calling OpenBLAS concurrently, was measured slower inside a
 * training step (OpenBLAS's own threads then compete with the callers for the two cores), although
 * faster in isolation; see benchmarks/RESULTS.md. A sum into one C ({@code strideC == 0})
 * accumulates in place: beta for the first product, 1 after.
 */
final class BatchedGemm {
  private BatchedGemm() {}

  static void run(GemmStridedBatched op, FloatPointer a, FloatPointer b, FloatPointer c) {
    FloatPointer ai = new FloatPointer(a);
    FloatPointer bi = new FloatPointer(b);
    FloatPointer ci = new FloatPointer(c);
    for (int i = 0; i < op.count(); i++) {
      cblas_sgemm(
          CblasRowMajor,
          op.transA() ? CblasTrans : CblasNoTrans,
          op.transB() ? CblasTrans : CblasNoTrans,
          op.m(),
          op.n(),
          op.k(),
          op.alpha(),
          ai.position(a.position() + i * op.strideA()),
          op.lda(),
          bi.position(b.position() + i * op.strideB()),
          op.ldb(),
          op.sumsIntoOneC() && i > 0 ? 1f : op.beta(),
          ci.position(c.position() + i * op.strideC()),
          op.ldc());
    }
  }
}
