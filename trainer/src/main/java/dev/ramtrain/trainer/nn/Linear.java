package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.AddBias;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.SumRows;
import java.util.List;

/**
 * {@code y = x Wᵀ + b} with W stored [out, in], as PyTorch's nn.Linear; with {@link
 * Precision#BF16}, each GEMM's operands are bf16 and its result is rounded to bf16.
 */
public final class Linear extends BaseLayer {
  private final int in;
  private final int out;
  private final Precision precision;
  private DeviceBuffer weight;
  private DeviceBuffer bias;
  private DeviceBuffer weightGrad;
  private DeviceBuffer biasGrad;
  private DeviceBuffer y;
  private DeviceBuffer dx;
  private DeviceBuffer x; // the last forward's input, kept for backward
  // bf16 only: the operands of the GEMMs, and what rounds their results.
  private DeviceBuffer xHalf; // the input; after backward's dW, scratch for rounding dx
  private DeviceBuffer weightHalf;
  private DeviceBuffer dyHalf; // the output gradient; in forward, scratch for rounding y
  private DeviceBuffer wh; // the weights the last forward multiplied with

  public Linear(String name, int in, int out) {
    this(name, in, out, Precision.FP32);
  }

  public Linear(String name, int in, int out, Precision precision) {
    super(name);
    if (in < 1 || out < 1) {
      throw new IllegalArgumentException(
          name + ": features must be positive, got " + in + " -> " + out);
    }
    this.in = in;
    this.out = out;
    this.precision = precision;
  }

  @Override
  public int inputSize() {
    return in;
  }

  @Override
  public int outputSize() {
    return out;
  }

  @Override
  public List<ParamSpec> parameters() {
    return List.of(
        new ParamSpec(name + ".weight", new int[] {out, in}, ParamSpec.Init.KAIMING_UNIFORM, in),
        new ParamSpec(name + ".bias", new int[] {out}, ParamSpec.Init.FAN_IN_UNIFORM, in));
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    weight = params.value(name + ".weight");
    bias = params.value(name + ".bias");
    weightGrad = params.grad(name + ".weight");
    biasGrad = params.grad(name + ".bias");
    y = own("out", (long) maxBatch * out);
    dx = own("dx", (long) maxBatch * in);
    if (precision == Precision.BF16) {
      xHalf = own("in.bf16", DType.BF16, (long) maxBatch * in);
      dyHalf = own("grad.bf16", DType.BF16, (long) maxBatch * out);
      if (weight.dtype() != DType.BF16) { // streamed bf16 weights are bf16 already
        weightHalf = own("weight.bf16", DType.BF16, (long) out * in);
      }
    }
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer input, int batch, boolean training) {
    DeviceBuffer yb = y.view(0, (long) batch * out);
    if (precision == Precision.BF16) {
      x = Precision.inBf16(backend, s, input, xHalf);
      wh = Precision.inBf16(backend, s, weight, weightHalf);
    } else {
      x = input;
      wh = weight;
    }
    // y [batch, out] = x [batch, in] · Wᵀ (W [out, in])
    backend.run(s, new Gemm(false, true, batch, out, in, 1f, x, in, wh, in, 0f, yb, out));
    backend.run(s, new AddBias(yb, bias, batch, out));
    if (precision == Precision.BF16) {
      Precision.round(backend, s, yb, dyHalf);
    }
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    backend.run(s, new SumRows(dy, biasGrad, batch, out, 1f)); // db += Σ dy
    DeviceBuffer g = precision == Precision.BF16 ? Precision.inBf16(backend, s, dy, dyHalf) : dy;
    backend.run(
        s,
        new Gemm(
            true, false, out, in, batch, 1f, g, out, x, in, 1f, weightGrad, in)); // dW += dyᵀ x
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, (long) batch * in);
    backend.run(
        s, new Gemm(false, false, batch, in, out, 1f, g, out, wh, in, 0f, dxb, in)); // dx = dy W
    if (precision == Precision.BF16) {
      Precision.round(backend, s, dxb, xHalf); // the bf16 input has served dW
    }
    return dxb;
  }
}
