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
import static org.bytedeco.dnnl.global.dnnl.DNNL_ARG_WORKSPACE;

import java.nio.FloatBuffer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.bytedeco.dnnl.batch_normalization_backward;
import org.bytedeco.dnnl.batch_normalization_forward;
import org.bytedeco.dnnl.engine;
import org.bytedeco.dnnl.global.dnnl;
import org.bytedeco.dnnl.memory;
import org.bytedeco.dnnl.primitive;
import org.bytedeco.dnnl.primitive_attr;
import org.bytedeco.dnnl.stream;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * oneDNN's batch normalization of activations whose channels are blocked or last (nChw16c, NHWC:
 * the layouts its kernels are fast in; on NCHW they were no faster than the Java kernels), for one
 * shape: training forward, evaluation forward and backward, each made on first use (per epsilon,
 * and with or without a fused ReLU). oneDNN keeps each channel's biased variance where the
 * operations keep {@code 1 / sqrt(var + eps)}, so the conversions are made here, as {@link
 * OneDnnLayerNorm} does: forward derives the inverse (and moves the running statistics, the
 * variance unbiased, as nn.BatchNorm2d does); backward runs with epsilon 0 on {@code 1 / invStd²}.
 * Scale and shift gradients come out into scratch and are added into the backend's, as parameter
 * gradients accumulate.
 *
 * <p>With a fused ReLU ({@code fuse_norm_relu}) the training forward writes {@code max(y, 0)} and a
 * bit per value into the caller's mask (oneDNN's workspace), which the backward masks the incoming
 * gradient by: the ReLU's two passes over the activations (and its gradient's) are gone.
 */
final class OneDnnBatchNorm implements AutoCloseable {
  private static final int SCALE_SHIFT = dnnl.dnnl_use_scale | dnnl.dnnl_use_shift;

  /** A primitive of this shape: its kind, epsilon and flags. */
  private record Made(int kind, float eps, int flags) {}

  private final NativeObjects natives = new NativeObjects();
  private final Map<Made, BoundPrimitive> made = new HashMap<>();
  private final engine eng;
  private final int n;
  private final int c;
  private final int hw;
  private final memory.format_tag layout; // of the activations, as OneDnn.channelLayout says
  private final long count; // values per channel: n · hw
  private final FloatPointer variance;
  private final FloatPointer scaleGrad;
  private final FloatPointer shiftGrad;
  private long maskBytes = -1; // reluMaskBytes(), once asked

  OneDnnBatchNorm(engine eng, int n, int c, int hw, int block, int engineBlock) {
    this.eng = eng;
    this.n = n;
    this.c = c;
    this.hw = hw;
    this.layout = OneDnn.channelLayout(block, c, engineBlock);
    this.count = (long) n * hw;
    variance = natives.own(new FloatPointer(c));
    scaleGrad = natives.own(new FloatPointer(c));
    shiftGrad = natives.own(new FloatPointer(c));
  }

  /** Bytes of the mask a training forward with a fused ReLU writes (oneDNN's workspace). */
  long reluMaskBytes() {
    if (maskBytes < 0) {
      try (NativeObjects own = new NativeObjects()) {
        maskBytes =
            own.own(
                    forwardDesc(
                        own, eng, n, c, hw, layout, dnnl.dnnl_forward_training, 0f, flags(true)))
                .workspace_desc()
                .get_size();
      }
    }
    return maskBytes;
  }

  /**
   * Training: batch statistics, the saved mean and inverse, the running statistics moved; with a
   * {@code reluMask} (else null), {@code y} is ReLU'd and the mask written for the backward.
   */
  void train(
      stream st,
      float eps,
      Pointer x,
      Pointer gamma,
      Pointer beta,
      Pointer y,
      Pointer reluMask,
      Pointer mean,
      FloatBuffer savedMean,
      FloatBuffer savedInvStd,
      float momentum,
      FloatBuffer runningMean,
      FloatBuffer runningVar) {
    Made kind = new Made(dnnl.dnnl_forward_training, eps, flags(reluMask != null));
    BoundPrimitive forward = made.computeIfAbsent(kind, this::forward);
    if (reluMask == null) {
      forward.run(st, x, y, gamma, beta, mean, variance);
    } else {
      forward.run(st, x, y, gamma, beta, mean, variance, reluMask);
    }
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
    made.computeIfAbsent(
            new Made(dnnl.dnnl_forward_inference, eps, SCALE_SHIFT | dnnl.dnnl_use_global_stats),
            this::forward)
        .run(st, x, y, gamma, beta, runningMean, runningVar);
  }

  /** dy is the gradient of the ReLU'd output where {@code reluMask} (the forward's) is not null. */
  void backward(
      stream st,
      Pointer x,
      Pointer dy,
      Pointer reluMask,
      Pointer gamma,
      Pointer mean,
      FloatBuffer invStd,
      Pointer dx,
      FloatBuffer dgamma,
      FloatBuffer dbeta) {
    NormStatistics.varianceOf(invStd, variance); // the backward's epsilon is 0
    BoundPrimitive backward =
        made.computeIfAbsent(
            new Made(dnnl.dnnl_backward, 0f, flags(reluMask != null)), this::backward);
    if (reluMask == null) {
      backward.run(st, x, dy, mean, variance, gamma, dx, scaleGrad, shiftGrad);
    } else {
      backward.run(st, x, dy, mean, variance, gamma, dx, scaleGrad, shiftGrad, reluMask);
    }
    NormStatistics.accumulate(scaleGrad, shiftGrad, dgamma, dbeta);
  }

  @Override
  public void close() {
    made.values().forEach(BoundPrimitive::close);
    natives.close();
  }

  private static int flags(boolean relu) {
    return relu ? SCALE_SHIFT | dnnl.dnnl_fuse_norm_relu : SCALE_SHIFT;
  }

  private static batch_normalization_forward.primitive_desc forwardDesc(
      NativeObjects own,
      engine eng,
      int n,
      int c,
      int hw,
      memory.format_tag layout,
      int kind,
      float eps,
      int flags) {
    memory.desc data = own.own(data(n, c, hw, layout));
    return own.own(
        new batch_normalization_forward.primitive_desc(
            eng, kind, data, data, eps, flags, own.own(new primitive_attr()), false));
  }

  private BoundPrimitive forward(Made kind) {
    NativeObjects own = new NativeObjects();
    memory.desc data = own.own(data(n, c, hw, layout));
    memory.desc perChannel = own.own(vector(c));
    batch_normalization_forward.primitive_desc pd =
        forwardDesc(own, eng, n, c, hw, layout, kind.kind(), kind.eps(), kind.flags());
    int[] args = {
      DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE
    };
    memory.desc[] descs = {data, data, perChannel, perChannel, perChannel, perChannel};
    return bound(own, new batch_normalization_forward(pd), kind, args, descs, pd.workspace_desc());
  }

  private BoundPrimitive backward(Made kind) {
    NativeObjects own = new NativeObjects();
    memory.desc data = own.own(data(n, c, hw, layout));
    memory.desc perChannel = own.own(vector(c));
    // The backward's hint: a forward with the backward's epsilon (0) and flags, never run.
    batch_normalization_forward.primitive_desc hint =
        forwardDesc(own, eng, n, c, hw, layout, dnnl.dnnl_forward_training, 0f, kind.flags());
    batch_normalization_backward.primitive_desc pd =
        own.own(
            new batch_normalization_backward.primitive_desc(
                eng,
                dnnl.dnnl_backward,
                data,
                data,
                data,
                0f,
                kind.flags(),
                hint,
                own.own(new primitive_attr()),
                false));
    int[] args = {
      DNNL_ARG_SRC,
      DNNL_ARG_DIFF_DST,
      DNNL_ARG_MEAN,
      DNNL_ARG_VARIANCE,
      DNNL_ARG_SCALE,
      DNNL_ARG_DIFF_SRC,
      DNNL_ARG_DIFF_SCALE,
      DNNL_ARG_DIFF_SHIFT
    };
    memory.desc[] descs = {
      data, data, perChannel, perChannel, perChannel, data, perChannel, perChannel
    };
    return bound(own, new batch_normalization_backward(pd), kind, args, descs, pd.workspace_desc());
  }

  /** The primitive on {@code args}, and, with a fused ReLU, the mask as its workspace last. */
  private BoundPrimitive bound(
      NativeObjects own,
      primitive made,
      Made kind,
      int[] args,
      memory.desc[] descs,
      memory.desc workspace) {
    own.own(workspace);
    if ((kind.flags() & dnnl.dnnl_fuse_norm_relu) != 0) {
      args = Arrays.copyOf(args, args.length + 1);
      args[args.length - 1] = DNNL_ARG_WORKSPACE;
      descs = Arrays.copyOf(descs, descs.length + 1);
      descs[descs.length - 1] = workspace;
    }
    return new BoundPrimitive(own, eng, made, args, descs);
  }

  /** n images of c channels at hw positions, in {@code layout}. */
  private static memory.desc data(int n, int c, int hw, memory.format_tag layout) {
    return new memory.desc(new long[] {n, c, hw, 1}, memory.data_type.f32, layout);
  }

  private static memory.desc vector(int c) {
    return new memory.desc(new long[] {c}, memory.data_type.f32, memory.format_tag.a);
  }
}
