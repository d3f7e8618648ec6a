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
import java.util.HashMap;
import java.util.Map;
import org.bytedeco.dnnl.batch_normalization_backward;
import org.bytedeco.dnnl.batch_normalization_forward;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.primitive_attr;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * oneDNN's batch normalization of activations whose channels are blocked (nChw16c: the layout its
 * kernels are fast in; on NCHW they were no faster than the Java kernels), for one shape: training
 * forward, evaluation forward (both made per epsilon, on first use) and backward. oneDNN keeps each
 * channel's biased variance where the operations keep {@code 1 / sqrt(var + eps)}, so the
 * conversions are made here, as {@link OneDnnLayerNorm} does: forward derives the inverse (and
 * moves the running statistics, the variance unbiased, as nn.BatchNorm2d does); backward runs with
 * epsilon 0 on {@code 1 / invStd²}. Scale and shift gradients come out into scratch and are added
 * into the backend's, as parameter gradients accumulate.
 */
final class OneDnnBatchNorm implements AutoCloseable {
  private static final int SCALE_SHIFT = dnnl.dnnl_use_scale | dnnl.dnnl_use_shift;

  private final NativeObjects natives = new NativeObjects();
  private final Map<Float, BoundPrimitive> trains = new HashMap<>();
  private final Map<Float, BoundPrimitive> inferences = new HashMap<>();
  private final BoundPrimitive backward;
  private final engine eng;
  private final int n;
  private final int c;
  private final int hw;
  private final int block;
  private final long count; // values per channel: n · hw
  private final FloatPointer variance;
  private final FloatPointer scaleGrad;
  private final FloatPointer shiftGrad;

  OneDnnBatchNorm(engine eng, int n, int c, int hw, int block) {
    this.eng = eng;
    this.n = n;
    this.c = c;
    this.hw = hw;
    this.block = block;
    this.count = (long) n * hw;
    int flags = SCALE_SHIFT;
    NativeObjects own = new NativeObjects();
    memory.desc data = own.own(data(n, c, hw, block));
    memory.desc perChannel = own.own(vector(c));
    // The backward's hint: a forward with the backward's epsilon (0), never run.
    batch_normalization_forward.primitive_desc hint =
        own.own(
            new batch_normalization_forward.primitive_desc(
                eng,
                dnnl.dnnl_forward_training,
                data,
                data,
                0f,
                flags,
                own.own(new primitive_attr()),
                false));
    batch_normalization_backward.primitive_desc bwd =
        own.own(
            new batch_normalization_backward.primitive_desc(
                eng,
                dnnl.dnnl_backward,
                data,
                data,
                data,
                0f,
                flags,
                hint,
                own.own(new primitive_attr()),
                false));
    backward =
        new BoundPrimitive(
            own,
            eng,
            new batch_normalization_backward(bwd),
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
            new memory.desc[] {
              data, data, perChannel, perChannel, perChannel, data, perChannel, perChannel
            });
    variance = natives.own(new FloatPointer(c));
    scaleGrad = natives.own(new FloatPointer(c));
    shiftGrad = natives.own(new FloatPointer(c));
  }

  /** Training: batch statistics, the saved mean and inverse, the running statistics moved. */
  void train(
      stream st,
      float eps,
      Pointer x,
      Pointer gamma,
      Pointer beta,
      Pointer y,
      Pointer mean,
      FloatBuffer savedMean,
      FloatBuffer savedInvStd,
      float momentum,
      FloatBuffer runningMean,
      FloatBuffer runningVar) {
    trains
        .computeIfAbsent(eps, e -> forward(e, dnnl.dnnl_forward_training, SCALE_SHIFT))
        .run(st, x, y, gamma, beta, mean, variance);
    NormStatistics.inverseOf(variance, eps, savedInvStd);
    double unbias = count > 1 ? count / (count - 1.0) : 1;
    for (int ch = 0; ch < savedInvStd.capacity(); ch++) {
      double var = variance.get(ch);
      runningMean.put(
          ch, (float) ((1 - momentum) * runningMean.get(ch) + momentum * savedMean.get(ch)));
      runningVar.put(ch, (float) ((1 - momentum) * runningVar.get(ch) + momentum * var * unbias));
    }
  }

  /** Evaluation: the running statistics. */
  void inference(
      stream st,
      float eps,
      Pointer x,
      Pointer gamma,
      Pointer beta,
      Pointer runningMean,
      Pointer runningVar,
      Pointer y) {
    inferences
        .computeIfAbsent(
            eps,
            e -> forward(e, dnnl.dnnl_forward_inference, SCALE_SHIFT | dnnl.dnnl_use_global_stats))
        .run(st, x, y, gamma, beta, runningMean, runningVar);
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
    NormStatistics.varianceOf(invStd, variance); // the backward's epsilon is 0
    backward.run(st, x, dy, mean, variance, gamma, dx, scaleGrad, shiftGrad);
    NormStatistics.accumulate(scaleGrad, shiftGrad, dgamma, dbeta);
  }

  @Override
  public void close() {
    trains.values().forEach(BoundPrimitive::close);
    inferences.values().forEach(BoundPrimitive::close);
    backward.close();
    natives.close();
  }

  private BoundPrimitive forward(float eps, int kind, int flags) {
    NativeObjects own = new NativeObjects();
    memory.desc data = own.own(data(n, c, hw, block));
    memory.desc perChannel = own.own(vector(c));
    batch_normalization_forward.primitive_desc pd =
        own.own(
            new batch_normalization_forward.primitive_desc(
                eng, kind, data, data, eps, flags, own.own(new primitive_attr()), false));
    return new BoundPrimitive(
        own,
        eng,
        new batch_normalization_forward(pd),
        new int[] {
          DNNL_ARG_SRC,
          DNNL_ARG_DST,
          DNNL_ARG_SCALE,
          DNNL_ARG_SHIFT,
          DNNL_ARG_MEAN,
          DNNL_ARG_VARIANCE
        },
        new memory.desc[] {data, data, perChannel, perChannel, perChannel, perChannel});
  }

  /** n images of c channels at hw positions, channels blocked by {@code block}. */
  private static memory.desc data(int n, int c, int hw, int block) {
    return new memory.desc(
        new long[] {n, c, hw, 1}, memory.data_type.f32, OneDnn.channelLayout(block));
  }

  private static memory.desc vector(int c) {
    return new memory.desc(new long[] {c}, memory.data_type.f32, memory.format_tag.a);
  }
}
