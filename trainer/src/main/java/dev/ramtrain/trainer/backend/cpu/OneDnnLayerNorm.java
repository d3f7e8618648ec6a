package dev.ramtrain.trainer.backend.cpu;

import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_SCALE;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_SHIFT;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DIFF_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_DST;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_MEAN;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SCALE;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SHIFT;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_SRC;
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_VARIANCE;

import java.nio.FloatBuffer;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.dnnl.layer_normalization_backward;
import org.bytedeco.dnnl.layer_normalization_forward;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.primitive_attr;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * oneDNN's layer normalization over the last dimension of [rows, size] (nn.LayerNorm of a
 * transformer's tokens), forward and backward, for one shape and epsilon. oneDNN keeps each row's
 * variance where the backend's operation keeps {@code 1 / sqrt(var + eps)}: forward turns the one
 * into the other through a scratch row of its own; backward, which the operation gives no epsilon,
 * runs with epsilon 0 on {@code 1 / invStd²} (var + eps, within an ulp or two), so that oneDNN's
 * {@code 1 / sqrt(var + 0)} is the saved inverse again. The scale and shift gradients come out into
 * scratch too and are added into the backend's, as parameter gradients accumulate.
 */
final class OneDnnLayerNorm implements AutoCloseable {
  private final NativeObjects natives = new NativeObjects();
  private final BoundPrimitive forward;
  private final BoundPrimitive backward;
  private final float eps;
  private final FloatPointer variance;
  private final FloatPointer scaleGrad;
  private final FloatPointer shiftGrad;

  OneDnnLayerNorm(engine eng, int rows, int size, float eps) {
    this.eps = eps;
    NativeObjects forwardOwn = new NativeObjects();
    NativeObjects backwardOwn = new NativeObjects();
    memory.desc data = forwardOwn.own(desc(rows, size));
    memory.desc stats = forwardOwn.own(vector(rows));
    memory.desc params = forwardOwn.own(vector(size));
    int flags = dnnl.dnnl_use_scale | dnnl.dnnl_use_shift;
    layer_normalization_forward.primitive_desc fwd =
        forwardOwn.own(
            new layer_normalization_forward.primitive_desc(
                eng,
                dnnl.dnnl_forward_training,
                data,
                data,
                eps,
                flags,
                forwardOwn.own(new primitive_attr()),
                false));
    forward =
        new BoundPrimitive(
            forwardOwn,
            eng,
            new layer_normalization_forward(fwd),
            new int[] {
              DNNL_ARG_SRC,
              DNNL_ARG_DST,
              DNNL_ARG_SCALE,
              DNNL_ARG_SHIFT,
              DNNL_ARG_MEAN,
              DNNL_ARG_VARIANCE
            },
            new memory.desc[] {data, data, params, params, stats, stats});
    layer_normalization_backward.primitive_desc bwd =
        backwardOwn.own(
            new layer_normalization_backward.primitive_desc(
                eng,
                dnnl.dnnl_backward,
                data,
                data,
                data,
                eps,
                flags,
                fwd,
                backwardOwn.own(new primitive_attr()),
                false));
    backward =
        new BoundPrimitive(
            backwardOwn,
            eng,
            new layer_normalization_backward(bwd),
            new int[] {
              DNNL_ARG_SRC,
              DNNL_ARG_DIFF_DST,
              DNNL_ARG_MEAN,
              DNNL_ARG_VARIANCE,
              DNNL_ARG_SCALE,
              DNNL_ARG_DIFF_SRC,
              DNNL_ARG_DIFF_SCALE,
              DNNL_ARG_DIFF_SHIFT
            },
            new memory.desc[] {data, data, stats, stats, params, data, params, params});
    variance = natives.own(new FloatPointer(rows));
    scaleGrad = natives.own(new FloatPointer(size));
    shiftGrad = natives.own(new FloatPointer(size));
  }

  void forward(
      stream st,
      Pointer x,
      Pointer gamma,
      Pointer beta,
      Pointer y,
      Pointer mean,
      FloatBuffer invStd) {
    forward.run(st, x, y, gamma, beta, mean, variance);
    NormStatistics.inverseOf(variance, eps, invStd);
  }

  void backward(
      stream st,
      Pointer x,
      Pointer dy,
      Pointer gamma,
      Pointer mean,
      FloatBuffer invStd,
      Pointer dx,
      FloatBuffer dgamma,
      FloatBuffer dbeta) {
    NormStatistics.varianceOf(invStd, variance); // this instance's epsilon is 0 (OneDnn)
    backward.run(st, x, dy, mean, variance, gamma, dx, scaleGrad, shiftGrad);
    NormStatistics.accumulate(scaleGrad, shiftGrad, dgamma, dbeta);
  }

  @Override
  public void close() {
    forward.close();
    backward.close();
    natives.close();
  }

  private static memory.desc desc(int rows, int size) {
    return new memory.desc(new long[] {rows, size}, memory.data_type.f32, memory.format_tag.ab);
  }

  private static memory.desc vector(int n) {
    return new memory.desc(new long[] {n}, memory.data_type.f32, memory.format_tag.a);
  }
}
