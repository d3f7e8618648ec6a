package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.lowering.ConvolutionLowering;
import dev.ramtrain.trainer.backend.ops.AddChannelBias;
import dev.ramtrain.trainer.backend.ops.Col2im;
import dev.ramtrain.trainer.backend.ops.ConvWindow;
import dev.ramtrain.trainer.backend.ops.Convolution;
import dev.ramtrain.trainer.backend.ops.ConvolutionBackward;
import dev.ramtrain.trainer.backend.ops.Im2col;
import dev.ramtrain.trainer.backend.ops.SumChannels;
import java.util.List;

/**
 * 2-D convolution on NCHW activations, weight [out, in, k, k] as PyTorch's nn.Conv2d: in fp32 one
 * {@link Convolution} forward and one {@link ConvolutionBackward}, which the backend computes as it
 * does best (oneDNN on the CPU, im2col and GEMM elsewhere). With {@link Precision#BF16} the layer
 * lowers itself: im2col (per image, a [in·k·k, oh·ow] block) and a strided batch of per-image GEMMs
 * on bf16 columns, weights and output gradients, the output and input gradient rounded to bf16 (the
 * rounding torch.autocast does, which the convolution operations do not express).
 *
 * <p>What backward needs is kept as PyTorch keeps it, the input (the previous layer's output, not a
 * copy); the columns, nine times the input for a 3×3 kernel, are scratch in the model's shared
 * {@link Workspace}, computed again from the input in backward. The layer owns its output and its
 * input gradient only.
 */
public final class Conv2d extends BaseLayer {
  private final int in;
  private final int out;
  private final int h;
  private final int w;
  private final int k;
  private final int stride;
  private final int pad;
  private final int oh;
  private final int ow;
  private final int patch; // in * k * k
  private final boolean hasBias;
  private final Precision precision;
  private final ChannelLayout inputLayout;
  private final ChannelLayout outputLayout;
  private int inBlock = 1; // the layouts of x and y on the bound backend
  private int outBlock = 1;
  private DeviceBuffer weight;
  private DeviceBuffer bias;
  private DeviceBuffer weightGrad;
  private DeviceBuffer biasGrad;
  private DeviceBuffer y;
  private DeviceBuffer dx;
  private DeviceBuffer input; // the last forward's input: backward's columns are made from it
  // Scratch (the shared workspace): the columns, which backward's dL/dcols reuses; null on an
  // engine that convolves without them.
  private DeviceBuffer cols;
  // bf16 only, scratch: the GEMMs' operands, which also serve for rounding their results.
  private DeviceBuffer colsHalf; // the columns; after backward's dW, scratch for rounding dx
  private DeviceBuffer dyHalf; // the output gradient; in forward, scratch for rounding y
  private DeviceBuffer weightHalf; // kept: forward and backward multiply the same rounding
  private DeviceBuffer weightUsed; // the weights the last forward multiplied (for dx)

  public Conv2d(String name, int in, int h, int w, int out, int k, int stride, int pad) {
    this(name, in, h, w, out, k, stride, pad, true);
  }

  /** {@code bias} false for a convolution followed by batch norm, as ResNets have it. */
  public Conv2d(
      String name, int in, int h, int w, int out, int k, int stride, int pad, boolean bias) {
    this(name, in, h, w, out, k, stride, pad, bias, Precision.FP32);
  }

  public Conv2d(
      String name,
      int in,
      int h,
      int w,
      int out,
      int k,
      int stride,
      int pad,
      boolean bias,
      Precision precision) {
    this(
        name,
        in,
        h,
        w,
        out,
        k,
        stride,
        pad,
        bias,
        precision,
        ChannelLayout.NCHW,
        ChannelLayout.NCHW);
  }

  /** With the layouts of its input and output ({@link ChannelLayout}). */
  public Conv2d(
      String name,
      int in,
      int h,
      int w,
      int out,
      int k,
      int stride,
      int pad,
      boolean bias,
      Precision precision,
      ChannelLayout inputLayout,
      ChannelLayout outputLayout) {
    super(name);
    if (in < 1 || out < 1 || k < 1 || stride < 1 || pad < 0 || h + 2 * pad < k || w + 2 * pad < k) {
      throw new IllegalArgumentException(
          name
              + ": bad convolution "
              + in
              + "x"
              + h
              + "x"
              + w
              + " -> "
              + out
              + " k"
              + k
              + " s"
              + stride
              + " p"
              + pad);
    }
    this.in = in;
    this.out = out;
    this.h = h;
    this.w = w;
    this.k = k;
    this.stride = stride;
    this.pad = pad;
    this.oh = (h + 2 * pad - k) / stride + 1;
    this.ow = (w + 2 * pad - k) / stride + 1;
    this.patch = in * k * k;
    this.hasBias = bias;
    this.precision = precision;
    this.inputLayout = inputLayout;
    this.outputLayout = outputLayout;
  }

  public int outputHeight() {
    return oh;
  }

  public int outputWidth() {
    return ow;
  }

  @Override
  public int inputSize() {
    return in * h * w;
  }

  @Override
  public int outputSize() {
    return out * oh * ow;
  }

  @Override
  public List<ParamSpec> parameters() {
    ParamSpec weightSpec =
        new ParamSpec(
            name + ".weight", new int[] {out, in, k, k}, ParamSpec.Init.KAIMING_UNIFORM, patch);
    if (!hasBias) {
      return List.of(weightSpec);
    }
    return List.of(
        weightSpec,
        new ParamSpec(name + ".bias", new int[] {out}, ParamSpec.Init.FAN_IN_UNIFORM, patch));
  }

  /**
   * The workspace's layout: F32 columns (none on an engine that convolves without them), then
   * (bf16) the bf16 columns, then the bf16 dL/dy.
   */
  private long colsBytes(Backend backend, int maxBatch) {
    return backend.convolvesWithoutColumns() ? 0 : 4L * maxBatch * oh * ow * patch;
  }

  private long colsHalfCount(int maxBatch) {
    // Also big enough to round dx through: a strided 1x1 convolution has fewer columns.
    return Math.max((long) maxBatch * oh * ow * patch, (long) maxBatch * inputSize());
  }

  @Override
  public long scratchBytes(Backend backend, int maxBatch) {
    long bytes = colsBytes(backend, maxBatch);
    if (precision == Precision.BF16) {
      bytes += 2 * colsHalfCount(maxBatch) + 2L * maxBatch * oh * ow * out;
    }
    return bytes;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    weight = params.value(name + ".weight");
    weightGrad = params.grad(name + ".weight");
    if (hasBias) {
      bias = params.value(name + ".bias");
      biasGrad = params.grad(name + ".bias");
    }
    inBlock = inputLayout.block(backend, in);
    outBlock = outputLayout.block(backend, out);
    if (precision == Precision.BF16 && !backend.convolvesInBf16() && inBlock * outBlock > 1) {
      // the lowered bf16 path multiplies im2col columns, which are NCHW's
      throw new IllegalStateException(
          name + ": bf16 over blocked channels needs an engine that convolves in bf16");
    }
    long positions = (long) maxBatch * oh * ow;
    y = own("out", positions * out);
    dx = inputGradient((long) maxBatch * inputSize());
    cols =
        backend.convolvesWithoutColumns() ? null : scratch("cols", DType.F32, 0, positions * patch);
    if (precision == Precision.BF16) {
      long halfAt = colsBytes(backend, maxBatch);
      colsHalf = scratch("cols.bf16", DType.BF16, halfAt, colsHalfCount(maxBatch));
      dyHalf =
          scratch("grad.bf16", DType.BF16, halfAt + 2 * colsHalfCount(maxBatch), positions * out);
      if (weight.dtype() != DType.BF16) {
        weightHalf = own("weight.bf16", DType.BF16, (long) out * patch); // the weight's count
      }
    }
  }

  /** The bf16 columns of the input's {@code batch} images (the bf16 path's). */
  private DeviceBuffer columns(Stream s, DeviceBuffer x, int batch) {
    DeviceBuffer colsb = cols.view(0, (long) batch * patch * oh * ow);
    backend.run(s, new Im2col(x, window(batch), colsb));
    return Precision.inBf16(backend, s, colsb, colsHalf);
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    int hw = oh * ow;
    input = x;
    if (precision == Precision.FP32) {
      return convolve(s, x, weight, batch);
    }
    if (backend.convolvesInBf16()) { // autocast's roundings around the engine's bf16 kernels
      weightUsed = Precision.inBf16(backend, s, weight, weightHalf);
      DeviceBuffer yb = convolve(s, Precision.inBf16(backend, s, x, colsHalf), weightUsed, batch);
      Precision.round(backend, s, yb, dyHalf);
      return yb;
    }
    // bf16 on an engine that lowers: lowered here, with autocast's roundings
    DeviceBuffer colsUsed = columns(s, x, batch);
    weightUsed = Precision.inBf16(backend, s, weight, weightHalf);
    backend.run(s, ConvolutionLowering.outputs(window(batch), out, weightUsed, colsUsed, y));
    DeviceBuffer yb = y.view(0, (long) batch * out * hw);
    if (hasBias) {
      backend.run(s, new AddChannelBias(yb, bias, batch, out, hw));
    }
    Precision.round(backend, s, yb, dyHalf);
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    int hw = oh * ow;
    if (precision == Precision.FP32) {
      return convolveBackward(s, input, dy, weight, batch, needInputGrad);
    }
    if (backend.convolvesInBf16()) {
      // the bias gradient sums the rounded dy here, as autocast's bf16 output gradient is
      DeviceBuffer dxb =
          convolveBackward(
              s,
              Precision.inBf16(backend, s, input, colsHalf),
              Precision.inBf16(backend, s, dy, dyHalf),
              weightUsed,
              batch,
              needInputGrad);
      if (dxb != null) {
        Precision.round(backend, s, dxb, colsHalf); // the bf16 input has served
      }
      return dxb;
    }
    if (hasBias) {
      backend.run(s, new SumChannels(dy, biasGrad, batch, out, hw));
    }
    DeviceBuffer g = Precision.inBf16(backend, s, dy, dyHalf);
    // The columns again, from the input (the workspace has served other layers since).
    DeviceBuffer colsUsed = columns(s, input, batch);
    backend.run(s, ConvolutionLowering.weightGradient(window(batch), out, g, colsUsed, weightGrad));
    if (!needInputGrad) {
      return null;
    }
    // into the columns' scratch (the weight gradient has read them), summed back by col2im
    backend.run(s, ConvolutionLowering.columnGradients(window(batch), out, weightUsed, g, cols));
    DeviceBuffer dxb = dx.view(0, (long) batch * inputSize());
    backend.run(s, new Col2im(cols.view(0, (long) batch * patch * hw), window(batch), dxb));
    Precision.round(backend, s, dxb, colsHalf); // the bf16 columns have served dW
    return dxb;
  }

  /** The engine's convolution of {@code x} by {@code w} (both fp32 or both bf16) into y. */
  private DeviceBuffer convolve(Stream s, DeviceBuffer x, DeviceBuffer w, int batch) {
    DeviceBuffer yb = y.view(0, (long) batch * outputSize());
    backend.run(
        s, new Convolution(x, w, bias, yb, window(batch), out, columns(batch), inBlock, outBlock));
    return yb;
  }

  /** The engine's gradients from {@code x}, {@code dy} and {@code w}; dx, or null if not asked. */
  private DeviceBuffer convolveBackward(
      Stream s, DeviceBuffer x, DeviceBuffer dy, DeviceBuffer w, int batch, boolean inputGrad) {
    DeviceBuffer dxb = inputGrad ? dx.view(0, (long) batch * inputSize()) : null;
    backend.run(
        s,
        new ConvolutionBackward(
            x,
            dy,
            w,
            weightGrad,
            biasGrad,
            dxb,
            window(batch),
            out,
            columns(batch),
            inBlock,
            outBlock));
    return dxb;
  }

  /** The columns' scratch for a batch: what an engine lowering to im2col works in, or none. */
  private DeviceBuffer columns(int batch) {
    return cols == null ? null : cols.view(0, (long) batch * patch * oh * ow);
  }

  /** This layer's window over a batch of its input. */
  private ConvWindow window(int batch) {
    return new ConvWindow(batch, in, h, w, k, k, stride, pad);
  }
}
