package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_WEIGHTS;

import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl.algorithm;
import org.bytedeco.dnnl.matmul;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.post_ops;
import org.bytedeco.dnnl.primitive_attr;

/**
 * oneDNN's matmul for one GEMM shape: {@code C = alpha · op(A) · op(B) + beta · C}, row-major with
 * leading dimensions as cblas_sgemm takes them, C fp32 and A and B both fp32 or both bf16 (the bf16
 * dot products of AVX512-BF16 and AMX, accumulating in fp32: what {@code precision=bf16} means).
 * Transposes and leading dimensions are strides of the memory descriptors, so the operands are read
 * where they are; alpha is an eltwise-linear post-op and beta a sum post-op. (A primitive made once
 * per shape runs its brgemm kernels at 410-450 GFLOP/s in fp32 on two AVX-512 cores where oneDNN's
 * sgemm call reached about 250.)
 */
final class OneDnnMatmul {
  /** A GEMM's shape and scalars: what one primitive serves. */
  record Shape(
      boolean bf16,
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      int lda,
      int ldb,
      float beta,
      int ldc) {
    /** The same GEMM adding its product to C: each product after the first of a summed batch. */
    Shape withBeta(float newBeta) {
      return new Shape(bf16, transA, transB, m, n, k, alpha, lda, ldb, newBeta, ldc);
    }
  }

  private OneDnnMatmul() {}

  /** The primitive for {@code g}; arguments A, B, C. */
  static BoundPrimitive make(engine eng, Shape g) {
    NativeObjects n = new NativeObjects();
    memory.data_type operands = g.bf16() ? memory.data_type.bf16 : memory.data_type.f32;
    memory.desc aDesc =
        n.own(
            new memory.desc(
                new long[] {g.m(), g.k()},
                operands,
                g.transA() ? new long[] {1, g.lda()} : new long[] {g.lda(), 1}));
    memory.desc bDesc =
        n.own(
            new memory.desc(
                new long[] {g.k(), g.n()},
                operands,
                g.transB() ? new long[] {1, g.ldb()} : new long[] {g.ldb(), 1}));
    memory.desc cDesc =
        n.own(
            new memory.desc(
                new long[] {g.m(), g.n()}, memory.data_type.f32, new long[] {g.ldc(), 1}));
    try (post_ops ops = new post_ops();
        primitive_attr attr = new primitive_attr()) {
      if (g.alpha() != 1f) {
        ops.append_eltwise(algorithm.eltwise_linear, g.alpha(), 0f);
      }
      if (g.beta() != 0f) {
        ops.append_sum(g.beta(), 0, memory.data_type.undef);
      }
      attr.set_post_ops(ops);
      matmul.primitive_desc pd =
          n.own(new matmul.primitive_desc(eng, aDesc, bDesc, cDesc, attr, false));
      return new BoundPrimitive(
          n,
          eng,
          new matmul(pd),
          new int[] {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
          new memory.desc[] {aDesc, bDesc, cDesc});
    }
  }
}
