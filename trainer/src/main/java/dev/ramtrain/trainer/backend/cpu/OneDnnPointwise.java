package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC_0;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC_1;

import org.bytedeco.dnnl.binary;
import org.bytedeco.dnnl.eltwise_backward;
import org.bytedeco.dnnl.eltwise_forward;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.reorder;
import org.bytedeco.dnnl.softmax_backward;
import org.bytedeco.dnnl.softmax_forward;

/**
 * oneDNN's elementwise work as {@link BoundPrimitive}s on plain fp32 buffers: the exact (erf) GELU
 * and softmax over rows, forward and backward (what a transformer block spends its time on besides
 * its GEMMs; the Java kernels compute them in double, for a reference's accuracy), and ReLU and
 * sums (a ResNet's: memory-bound, where oneDNN's vector loops run about twice the Java kernels'
 * speed on large activations).
 */
final class OneDnnPointwise {
  private OneDnnPointwise() {}

  /** {@code y = gelu(x)} over {@code count} elements; arguments x, y. */
  static BoundPrimitive gelu(engine eng, long count) {
    return eltwise(eng, dnnl.dnnl_eltwise_gelu_erf, count);
  }

  /** {@code dx = dy · gelu'(x)}; arguments x, dy, dx. */
  static BoundPrimitive geluBackward(engine eng, long count) {
    return eltwiseBackward(eng, dnnl.dnnl_eltwise_gelu_erf, count);
  }

  /** {@code y = max(x, 0)} (a negative zero may stay negative); arguments x, y. */
  static BoundPrimitive relu(engine eng, long count) {
    return eltwise(eng, dnnl.dnnl_eltwise_relu, count);
  }

  /** {@code dx = x > 0 ? dy : 0}; arguments x, dy, dx. */
  static BoundPrimitive reluBackward(engine eng, long count) {
    return eltwiseBackward(eng, dnnl.dnnl_eltwise_relu, count);
  }

  /** {@code out = a + b} over {@code count} elements (out may be a or b); arguments a, b, out. */
  static BoundPrimitive add(engine eng, long count) {
    NativeObjects n = new NativeObjects();
    memory.desc d = n.own(vector(count));
    binary.primitive_desc pd = n.own(new binary.primitive_desc(eng, dnnl.dnnl_binary_add, d, d, d));
    return new BoundPrimitive(
        n,
        eng,
        new binary(pd),
        new int[] {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST},
        descs(d, d, d));
  }

  /**
   * {@code count} values from fp32 to bf16 ({@code narrowing}: round to nearest even, AVX512-BF16's
   * VCVTNEPS2BF16 where the CPU has it) or back (exact); arguments src, dst.
   */
  static BoundPrimitive convert(engine eng, long count, boolean narrowing) {
    NativeObjects n = new NativeObjects();
    memory.desc f32 = n.own(vector(count));
    memory.desc bf16 =
        n.own(new memory.desc(new long[] {count}, memory.data_type.bf16, memory.format_tag.a));
    memory.desc from = narrowing ? f32 : bf16;
    memory.desc to = narrowing ? bf16 : f32;
    reorder.primitive_desc pd = n.own(new reorder.primitive_desc(eng, from, eng, to));
    return new BoundPrimitive(
        n, eng, new reorder(pd), new int[] {DNNL_ARG_SRC, DNNL_ARG_DST}, descs(from, to));
  }

  /** {@code y[r, c] += bias[c]} over [rows, cols], in place; arguments y, bias, y. */
  static BoundPrimitive addBias(engine eng, int rows, int cols) {
    NativeObjects n = new NativeObjects();
    memory.desc y = n.own(matrix(rows, cols));
    memory.desc bias = n.own(matrix(1, cols)); // broadcast over the rows
    binary.primitive_desc pd =
        n.own(new binary.primitive_desc(eng, dnnl.dnnl_binary_add, y, bias, y));
    return new BoundPrimitive(
        n,
        eng,
        new binary(pd),
        new int[] {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST},
        descs(y, bias, y));
  }

  private static BoundPrimitive eltwise(engine eng, int algorithm, long count) {
    NativeObjects n = new NativeObjects();
    memory.desc d = n.own(vector(count));
    eltwise_forward.primitive_desc pd = n.own(eltwiseForward(eng, n, algorithm, d));
    return new BoundPrimitive(
        n, eng, new eltwise_forward(pd), new int[] {DNNL_ARG_SRC, DNNL_ARG_DST}, descs(d, d));
  }

  private static BoundPrimitive eltwiseBackward(engine eng, int algorithm, long count) {
    NativeObjects n = new NativeObjects();
    memory.desc d = n.own(vector(count));
    eltwise_backward.primitive_desc pd =
        n.own(
            new eltwise_backward.primitive_desc(
                eng, algorithm, d, d, d, eltwiseForward(eng, n, algorithm, d)));
    return new BoundPrimitive(
        n,
        eng,
        new eltwise_backward(pd),
        new int[] {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC},
        descs(d, d, d));
  }

  /** {@code y} = softmax of each of {@code rows} rows of {@code x}; arguments x, y. */
  static BoundPrimitive softmax(engine eng, int rows, int cols) {
    NativeObjects n = new NativeObjects();
    memory.desc d = n.own(matrix(rows, cols));
    softmax_forward.primitive_desc pd = n.own(softmaxForward(eng, n, d));
    return new BoundPrimitive(
        n, eng, new softmax_forward(pd), new int[] {DNNL_ARG_SRC, DNNL_ARG_DST}, descs(d, d));
  }

  /** {@code dx = y ⊙ (dy − Σ dy ⊙ y)} per row; arguments y, dy, dx. */
  static BoundPrimitive softmaxBackward(engine eng, int rows, int cols) {
    NativeObjects n = new NativeObjects();
    memory.desc d = n.own(matrix(rows, cols));
    softmax_backward.primitive_desc pd =
        n.own(
            new softmax_backward.primitive_desc(
                eng, dnnl.dnnl_softmax_accurate, d, d, d, 1, softmaxForward(eng, n, d)));
    return new BoundPrimitive(
        n,
        eng,
        new softmax_backward(pd),
        new int[] {DNNL_ARG_DST, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC},
        descs(d, d, d));
  }

  private static eltwise_forward.primitive_desc eltwiseForward(
      engine eng, NativeObjects n, int algorithm, memory.desc d) {
    return n.own(
        new eltwise_forward.primitive_desc(eng, dnnl.dnnl_forward_training, algorithm, d, d));
  }

  private static softmax_forward.primitive_desc softmaxForward(
      engine eng, NativeObjects n, memory.desc d) {
    return n.own(
        new softmax_forward.primitive_desc(
            eng, dnnl.dnnl_forward_training, dnnl.dnnl_softmax_accurate, d, d, 1));
  }

  private static memory.desc vector(long count) {
    return new memory.desc(new long[] {count}, memory.data_type.f32, memory.format_tag.a);
  }

  private static memory.desc matrix(int rows, int cols) {
    return new memory.desc(new long[] {rows, cols}, memory.data_type.f32, memory.format_tag.ab);
  }

  private static memory.desc[] descs(memory.desc... d) {
    return d;
  }
}
