package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.AddBias;
import dev.ramtrain.trainer.backend.ops.Col2im;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.DepthwiseConvolution;
import dev.ramtrain.trainer.backend.ops.DepthwiseConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import dev.ramtrain.trainer.backend.ops.Im2col;
import dev.ramtrain.trainer.backend.ops.SumRows;
import java.util.List;

/**
 * A depthwise k×k convolution with bias, stride 1, "same" padding (nn.Conv2d(c, c, k, padding=k/2,
 * groups=c): ConvNeXt's {@code conv_dw}), weight [c, 1, k, k]. One image at a time: its im2col
 * columns are c blocks of [k·k, h·w], and each channel's output is its k·k weights times its block,
 * one batched GEMM over the channels. The output is channels last, each image's [h·w, c] rows
 * (ConvNeXt's permute before its norm, which PyTorch has as a view: no NCHW output is kept beside a
 * channels-last copy), so each channel's product is a column of them. The columns live in the
 * shared workspace and are made again from the kept input in backward, as {@link Conv2d}'s. An
 * engine with a direct depthwise convolution ({@link
 * dev.ramtrain.trainer.backend.Backend#convolvesDepthwise}, the GPU) runs that instead, one
 * operation per batch; the columns' workspace is kept in the plan either way.
 */
public final class DepthwiseConv2d extends BaseLayer {
  private final int c;
  private final int h;
  private final int w;
  private final int k;
  private final int taps;
  private DeviceBuffer weight;
  private DeviceBuffer bias;
  private DeviceBuffer weightGrad;
  private DeviceBuffer biasGrad;
  private DeviceBuffer y;
  private DeviceBuffer dx;
  private DeviceBuffer cols; // one image's, scratch
  private DeviceBuffer dcols; // one image's, scratch
  private DeviceBuffer input;

  /** The convolution, its output channels last: each image's [h·w, c] rows. */
  public static DepthwiseConv2d channelsLast(String name, int c, int h, int w, int k) {
    return new DepthwiseConv2d(name, c, h, w, k);
  }

  private DepthwiseConv2d(String name, int c, int h, int w, int k) {
    super(name);
    if (k < 1 || k % 2 == 0 || c < 1) {
      throw new IllegalArgumentException(name + ": a depthwise convolution needs an odd kernel");
    }
    this.c = c;
    this.h = h;
    this.w = w;
    this.k = k;
    this.taps = k * k;
  }

  /** Weights per channel (k·k): each output value is that many multiply-adds. */
  public int taps() {
    return taps;
  }

  @Override
  public int inputSize() {
    return c * h * w;
  }

  @Override
  public int outputSize() {
    return c * h * w;
  }

  @Override
  public List<ParamSpec> parameters() {
    return List.of(
        new ParamSpec(
            name + ".weight", new int[] {c, 1, k, k}, ParamSpec.Init.KAIMING_UNIFORM, taps),
        new ParamSpec(name + ".bias", new int[] {c}, ParamSpec.Init.FAN_IN_UNIFORM, taps));
  }

  @Override
  public long scratchBytes(Backend backend, int maxBatch) {
    return backend.convolvesDepthwise() ? 0 : 2 * 4L * c * taps * h * w;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    weight = params.value(name + ".weight");
    bias = params.value(name + ".bias");
    weightGrad = params.grad(name + ".weight");
    biasGrad = params.grad(name + ".bias");
    y = own("out", (long) maxBatch * outputSize());
    dx = inputGradient((long) maxBatch * inputSize());
    if (!backend.convolvesDepthwise()) {
      long block = (long) c * taps * h * w;
      cols = scratch("cols", DType.F32, 0, block);
      dcols = scratch("dcols", DType.F32, 4 * block, block);
    }
  }

  private ConvWindow window() {
    return new ConvWindow(1, c, h, w, k, k, 1, k / 2);
  }

  private DeviceBuffer image(DeviceBuffer batch, int i) {
    return batch.view((long) i * inputSize(), inputSize());
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    input = x;
    DeviceBuffer yb = y.view(0, (long) batch * outputSize());
    if (backend.convolvesDepthwise()) {
      DeviceBuffer xb = x.view(0, (long) batch * inputSize());
      backend.run(s, new DepthwiseConvolution(xb, weight, yb, batch, c, h, w, k));
    } else {
      for (int i = 0; i < batch; i++) {
        forwardLowered(s, image(x, i), image(yb, i));
      }
    }
    backend.run(s, new AddBias(yb, bias, batch * h * w, c));
    return yb;
  }

  /** One image's output rows as im2col and one batched GEMM over the channels. */
  private void forwardLowered(Stream s, DeviceBuffer x, DeviceBuffer y) {
    int hw = h * w;
    backend.run(s, new Im2col(x, window(), cols));
    // y[:, ch] (hw × 1, a column of the rows) = cols[ch]ᵀ (hw × k·k) · W[ch]ᵀ (k·k × 1)
    backend.run(
        s,
        new GemmStridedBatched(
            hw,
            1,
            taps,
            1f,
            GemmOperand.of(cols, hw).transposed().strided((long) taps * hw),
            GemmOperand.of(weight, 1).strided(taps),
            0f,
            GemmOperand.of(y, c).strided(1),
            c));
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    backend.run(s, new SumRows(dy, biasGrad, batch * h * w, c, 1f));
    DeviceBuffer dxb = needInputGrad ? dx.view(0, (long) batch * inputSize()) : null;
    if (backend.convolvesDepthwise()) {
      backend.run(
          s,
          new DepthwiseConvolutionBackward(
              input.view(0, (long) batch * inputSize()),
              dy.view(0, (long) batch * outputSize()),
              weight,
              weightGrad,
              dxb,
              batch,
              c,
              h,
              w,
              k));
    } else {
      for (int i = 0; i < batch; i++) {
        backwardLowered(s, image(input, i), image(dy, i), dxb == null ? null : image(dxb, i));
      }
    }
    return dxb;
  }

  /** One image's gradients: the weights' accumulated, the input's (dx not null) summed back. */
  private void backwardLowered(Stream s, DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx) {
    int hw = h * w; // dy[ch]: a column of the image's rows, stride c
    backend.run(s, new Im2col(x, window(), cols));
    // dW[ch]ᵀ (k·k × 1) += cols[ch] (k·k × hw) · dy[ch] (hw × 1)
    backend.run(
        s,
        new GemmStridedBatched(
            taps,
            1,
            hw,
            1f,
            GemmOperand.of(cols, hw).strided((long) taps * hw),
            GemmOperand.of(dy, c).strided(1),
            1f,
            GemmOperand.of(weightGrad, 1).strided(taps),
            c));
    if (dx != null) {
      // dcols[ch] (k·k × hw) = W[ch]ᵀ (k·k × 1) · dy[ch]ᵀ (1 × hw), then summed back
      backend.run(
          s,
          new GemmStridedBatched(
              taps,
              hw,
              1,
              1f,
              GemmOperand.of(weight, 1).strided(taps),
              GemmOperand.of(dy, c).transposed().strided(1),
              0f,
              GemmOperand.of(dcols, hw).strided((long) taps * hw),
              c));
      backend.run(s, new Col2im(dcols, window(), dx));
    }
  }
}
