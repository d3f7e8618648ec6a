package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC;

import org.bytedeco.dnnl.eltwise_backward;
import org.bytedeco.dnnl.eltwise_forward;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.softmax_backward;
import org.bytedeco.dnnl.softmax_forward;

/**
 * oneDNN's exact (erf) GELU and its softmax over rows, forward and backward, as {@link
 * BoundPrimitive}s on plain fp32 buffers: what a transformer block spends its time on besides its
 * GEMMs (the Java kernels compute them in double, for a reference's accuracy).
 */
final class OneDnnPointwise {
  private OneDnnPointwise() {}

  /** {@code y = gelu(x)} over {@code count} elements; arguments x, y. */
  static BoundPrimitive gelu(engine eng, long count) {
    NativeObjects n = new NativeObjects();
    memory.desc d = n.own(vector(count));
    eltwise_forward.primitive_desc pd = n.own(geluForward(eng, n, d));
    return new BoundPrimitive(
        n, eng, new eltwise_forward(pd), new int[] {DNNL_ARG_SRC, DNNL_ARG_DST}, descs(d, d));
  }

  /** {@code dx = dy · gelu'(x)}; arguments x, dy, dx. */
  static BoundPrimitive geluBackward(engine eng, long count) {
    NativeObjects n = new NativeObjects();
    memory.desc d = n.own(vector(count));
    eltwise_backward.primitive_desc pd =
        n.own(
            new eltwise_backward.primitive_desc(
                eng, dnnl.dnnl_eltwise_gelu_erf, d, d, d, geluForward(eng, n, d)));
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

  private static eltwise_forward.primitive_desc geluForward(
      engine eng, NativeObjects n, memory.desc d) {
    return n.own(
        new eltwise_forward.primitive_desc(
            eng, dnnl.dnnl_forward_training, dnnl.dnnl_eltwise_gelu_erf, d, d));
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
