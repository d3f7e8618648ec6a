package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_WEIGHTS;

import org.bytedeco.dnnl.IntMemoryMap;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl.algorithm;
import org.bytedeco.dnnl.matmul;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.post_ops;
import org.bytedeco.dnnl.primitive_attr;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.Pointer;

/**
 * oneDNN's matmul for one bf16 GEMM shape: {@code C = alpha · op(A) · op(B) + beta · C} with A and
 * B bf16, C fp32, row-major with the leading dimensions {@link Sgemm} takes: the bf16 dot products
 * of AVX512-BF16 and AMX, accumulating in fp32 (what {@code precision=bf16} means). Transposes and
 * leading dimensions are strides of the memory descriptors, so the operands are read where they
 * are; alpha is an eltwise-linear post-op and beta a sum post-op.
 */
final class OneDnnMatmul implements AutoCloseable {
  /** A GEMM's shape and scalars: what one primitive serves. */
  record Shape(
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      int lda,
      int ldb,
      float beta,
      int ldc) {}

  private final NativeObjects natives = new NativeObjects();
  private final matmul primitive;
  private final memory a;
  private final memory b;
  private final memory c;

  OneDnnMatmul(engine eng, Shape g) {
    memory.desc aDesc =
        own(
            new memory.desc(
                new long[] {g.m(), g.k()},
                memory.data_type.bf16,
                g.transA() ? new long[] {1, g.lda()} : new long[] {g.lda(), 1}));
    memory.desc bDesc =
        own(
            new memory.desc(
                new long[] {g.k(), g.n()},
                memory.data_type.bf16,
                g.transB() ? new long[] {1, g.ldb()} : new long[] {g.ldb(), 1}));
    memory.desc cDesc =
        own(
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
          own(new matmul.primitive_desc(eng, aDesc, bDesc, cDesc, attr, false));
      primitive = own(new matmul(pd));
    }
    a = own(new memory(aDesc, eng, (Pointer) null));
    b = own(new memory(bDesc, eng, (Pointer) null));
    c = own(new memory(cDesc, eng, (Pointer) null));
  }

  void run(stream st, Pointer aData, Pointer bData, Pointer cData) {
    a.set_data_handle(aData);
    b.set_data_handle(bData);
    c.set_data_handle(cData);
    try (IntMemoryMap args = new IntMemoryMap()) {
      args.put(DNNL_ARG_SRC, a);
      args.put(DNNL_ARG_WEIGHTS, b);
      args.put(DNNL_ARG_DST, c);
      primitive.execute(st, args);
    }
    st._wait();
  }

  @Override
  public void close() {
    natives.close();
  }

  private <P extends Pointer> P own(P p) {
    return natives.own(p);
  }
}
