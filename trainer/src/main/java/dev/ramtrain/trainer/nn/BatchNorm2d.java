package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.BatchNormBackward;
import dev.ramtrain.trainer.backend.ops.BatchNormInference;
import dev.ramtrain.trainer.backend.ops.BatchNormTrain;
import dev.ramtrain.trainer.backend.ops.Relu;
import dev.ramtrain.trainer.backend.ops.ReluBackward;
import java.util.List;

/**
 * Batch normalization of 4-D activations (NCHW, or channel-blocked as its {@link ChannelLayout}
 * allows), as nn.BatchNorm2d(c, eps=1e-5, momentum=0.1): batch statistics in training (moving the
 * running ones), running statistics in evaluation. Weight and bias are trained; running mean and
 * variance are buffers, saved with the weights.
 *
 * <p>{@link #withRelu} is batch norm and the in-place ReLU after it (torchvision's {@code
 * relu(bn(x))}): one operation where the engine fuses them ({@link
 * dev.ramtrain.trainer.backend.Backend#normReluMaskBytes}, a bit per value kept for backward), else
 * the ReLU over the output and its backward into scratch before batch norm's, as two layers would.
 */
public final class BatchNorm2d extends BaseLayer {
  private static final float EPS = 1e-5f;
  private static final float MOMENTUM = 0.1f;
  private boolean recomputing;

  private final int c;
  private final int hw;
  private final ChannelLayout layout;
  private final boolean relu;
  private int block = 1; // the layout on the bound backend
  private DeviceBuffer reluMask; // a fused ReLU's, for backward
  private DeviceBuffer reluGrad; // scratch: dy through the ReLU, where the engine does not fuse it
  private DeviceBuffer gamma;
  private DeviceBuffer beta;
  private DeviceBuffer gammaGrad;
  private DeviceBuffer betaGrad;
  private DeviceBuffer runningMean;
  private DeviceBuffer runningVar;
  private DeviceBuffer savedMean;
  private DeviceBuffer savedInvStd;
  private DeviceBuffer y;
  private DeviceBuffer dx;
  private DeviceBuffer x; // the last training forward's input, for backward
  private DeviceBuffer out; // and its output (ReLU'd: the ReLU's backward mask, where not fused)

  public BatchNorm2d(String name, int c, int h, int w) {
    this(name, c, h, w, ChannelLayout.NCHW);
  }

  public BatchNorm2d(String name, int c, int h, int w, ChannelLayout layout) {
    this(name, c, h, w, layout, false);
  }

  /** Batch norm, then ReLU over its output. */
  public static BatchNorm2d withRelu(String name, int c, int h, int w, ChannelLayout layout) {
    return new BatchNorm2d(name, c, h, w, layout, true);
  }

  private BatchNorm2d(String name, int c, int h, int w, ChannelLayout layout, boolean relu) {
    super(name);
    this.relu = relu;
    if (c < 1 || h < 1 || w < 1) {
      throw new IllegalArgumentException(name + ": bad shape " + c + "x" + h + "x" + w);
    }
    this.c = c;
    this.hw = h * w;
    this.layout = layout;
  }

  @Override
  public int inputSize() {
    return c * hw;
  }

  @Override
  public int outputSize() {
    return c * hw;
  }

  @Override
  public List<ParamSpec> parameters() {
    return List.of(
        new ParamSpec(name + ".weight", new int[] {c}, ParamSpec.Init.ONES, 0),
        new ParamSpec(name + ".bias", new int[] {c}, ParamSpec.Init.ZEROS, 0));
  }

  @Override
  public List<ParamSpec> buffers() {
    return List.of(
        new ParamSpec(name + ".running_mean", new int[] {c}, ParamSpec.Init.ZEROS, 0),
        new ParamSpec(name + ".running_var", new int[] {c}, ParamSpec.Init.ONES, 0));
  }

  /**
   * The ReLU's input gradient, for one call where the engine does not fuse it. Declared on every
   * engine: the shared workspace is sized before binding says which engine this is (a ResNet's
   * convolutions declare nine times this for their columns, so it costs nothing there).
   */
  @Override
  public long scratchBytes(Backend backend, int maxBatch) {
    // the ReLU's gradient, only where the engine keeps no mask of it (bind's choice)
    boolean masked = backend.normReluMaskBytes(maxBatch, c, hw, layout.block(backend, c)) > 0;
    return relu && !masked ? 4L * maxBatch * inputSize() : 0;
  }

  @Override
  public void recomputing(boolean on) {
    recomputing = on;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    block = layout.block(backend, c);
    gamma = params.value(name + ".weight");
    beta = params.value(name + ".bias");
    gammaGrad = params.grad(name + ".weight");
    betaGrad = params.grad(name + ".bias");
    runningMean = params.buffer(name + ".running_mean");
    runningVar = params.buffer(name + ".running_var");
    savedMean = own("saved-mean", c);
    savedInvStd = own("saved-inv-std", c);
    y = own("out", (long) maxBatch * outputSize());
    dx = inputGradient((long) maxBatch * inputSize());
    if (relu && !inference()) { // the mask is for backward; evaluation applies the ReLU alone
      long maskBytes = backend.normReluMaskBytes(maxBatch, c, hw, block);
      if (maskBytes > 0) {
        reluMask = own("relu-mask", DType.U8, maskBytes);
      } else {
        reluGrad = scratch("relu-grad", DType.F32, 0, (long) maxBatch * inputSize());
      }
    }
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer input, int batch, boolean training) {
    DeviceBuffer yb = y.view(0, (long) batch * outputSize());
    if (training) {
      x = input;
      backend.run(
          s,
          new BatchNormTrain(
              input,
              batch,
              c,
              hw,
              gamma,
              beta,
              EPS,
              recomputing ? 0f : MOMENTUM, // momentum 0 leaves the running statistics as they are
              runningMean,
              runningVar,
              yb,
              savedMean,
              savedInvStd,
              block,
              reluMask));
      out = yb;
    } else {
      x = null;
      backend.run(
          s,
          new BatchNormInference(
              input, batch, c, hw, gamma, beta, EPS, runningMean, runningVar, yb, block));
    }
    if (relu && (reluMask == null || !training)) {
      backend.run(s, new Relu(yb, yb));
    }
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    if (x == null) {
      throw new IllegalStateException(name + ": backward without a training forward");
    }
    DeviceBuffer dxb = dx.view(0, (long) batch * inputSize());
    DeviceBuffer g = dy;
    if (reluGrad != null) {
      g = reluGrad.view(0, (long) batch * outputSize());
      backend.run(s, new ReluBackward(out, dy, g));
    }
    backend.run(
        s,
        new BatchNormBackward(
            x,
            g,
            batch,
            c,
            hw,
            gamma,
            savedMean,
            savedInvStd,
            gammaGrad,
            betaGrad,
            dxb,
            block,
            reluMask));
    return needInputGrad ? dxb : null;
  }
}
