package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_WEIGHTS;

import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
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
 * sgemm call reached about 250.) A strided batch whose products land in separate Cs is one
 * primitive over 3-D operands (a stride of 0 broadcasts that operand), not a call per item.
 */
final class OneDnnMatmul {
  /**
   * A GEMM's shape and scalars: what one primitive serves; {@code count} products at the strides
   * given (elements), or 1 for a single GEMM (strides then 0).
   */
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
      int ldc,
      int count,
      long strideA,
      long strideB,
      long strideC) {
    /**
     * The shape of {@code op}'s GEMMs: one batched primitive when its products land in separate Cs,
     * else a single GEMM that the caller runs per item (summed into one C, each after the first
     * with {@link #withBeta} 1).
     */
    static Shape of(boolean bf16, GemmStridedBatched op) {
      boolean batched = op.count() > 1 && !op.sumsIntoOneC();
      return new Shape(
          bf16,
          op.transA(),
          op.transB(),
          op.m(),
          op.n(),
          op.k(),
          op.alpha(),
          op.lda(),
          op.ldb(),
          op.beta(),
          op.ldc(),
          batched ? op.count() : 1,
          batched ? op.strideA() : 0,
          batched ? op.strideB() : 0,
          batched ? op.strideC() : 0);
    }

    /** The same GEMM adding its product to C: each product after the first of a summed batch. */
    Shape withBeta(float newBeta) {
      return new Shape(
          bf16, transA, transB, m, n, k, alpha, lda, ldb, newBeta, ldc, count, strideA, strideB,
          strideC);
    }
  }

  private OneDnnMatmul() {}

  /**
   * A rows × cols operand at {@code strides}; in a batch, the items {@code batchStride} apart, or
   * one broadcast to all when that is 0.
   */
  private static memory.desc matrix(
      Shape g, long rows, long cols, long[] strides, long batchStride, memory.data_type type) {
    if (g.count() == 1) {
      return new memory.desc(new long[] {rows, cols}, type, strides);
    }
    return new memory.desc(
        new long[] {batchStride == 0 ? 1 : g.count(), rows, cols},
        type,
        new long[] {Math.max(1, batchStride), strides[0], strides[1]});
  }

  /** The primitive for {@code g}; arguments A, B, C. */
  static BoundPrimitive make(engine eng, Shape g) {
    NativeObjects n = new NativeObjects();
    memory.data_type operands = g.bf16() ? memory.data_type.bf16 : memory.data_type.f32;
    memory.desc aDesc =
        n.own(
            matrix(
                g,
                g.m(),
                g.k(),
                g.transA() ? new long[] {1, g.lda()} : new long[] {g.lda(), 1},
                g.strideA(),
                operands));
    memory.desc bDesc =
        n.own(
            matrix(
                g,
                g.k(),
                g.n(),
                g.transB() ? new long[] {1, g.ldb()} : new long[] {g.ldb(), 1},
                g.strideB(),
                operands));
    memory.desc cDesc =
        n.own(matrix(g, g.m(), g.n(), new long[] {g.ldc(), 1}, g.strideC(), memory.data_type.f32));
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
