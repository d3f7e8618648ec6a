package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.AddBias;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import dev.ramtrain.trainer.backend.ops.SumRows;
import java.util.List;

/**
 * {@code y = x Wᵀ + b} with W stored [out, in], as PyTorch's nn.Linear; with {@link
 * Precision#BF16}, each GEMM's operands are bf16 and its result is rounded to bf16. A sample may
 * hold several rows ({@code tokens}: a transformer's [tokens, features]), each multiplied alike.
 */
public final class Linear extends BaseLayer {
  private final int in;
  private final int out;
  private final int tokens;
  private final Precision precision;
  private final ParamSpec.Init weightInit;
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
  private boolean freshGradients; // the next backward writes dW and db instead of adding

  public Linear(String name, int in, int out) {
    this(name, in, out, Precision.FP32);
  }

  public Linear(String name, int in, int out, Precision precision) {
    this(name, in, out, 1, precision, false);
  }

  /**
   * A Linear layer of a transformer: applied to each of a sample's {@code tokens} rows, initialized
   * as timm initializes them (weights trunc_normal_(std=.02), biases zero) when {@code timmInit}.
   */
  public Linear(String name, int in, int out, int tokens, Precision precision, boolean timmInit) {
    super(name);
    if (in < 1 || out < 1 || tokens < 1) {
      throw new IllegalArgumentException(
          name + ": features must be positive, got " + in + " -> " + out + " on " + tokens);
    }
    this.in = in;
    this.out = out;
    this.tokens = tokens;
    this.precision = precision;
    this.weightInit = timmInit ? ParamSpec.Init.TRUNC_NORMAL : ParamSpec.Init.KAIMING_UNIFORM;
  }

  /** Its two gradients are each one operation's output: the first backward writes them. */
  @Override
  public boolean writesFreshGradients() {
    return true;
  }

  @Override
  public void gradientsAreZero() {
    freshGradients = true;
  }

  /** Backward reads the kept input and the weights, never the output. */
  @Override
  public boolean backwardReadsOutput() {
    return false;
  }

  @Override
  public int inputSize() {
    return tokens * in;
  }

  @Override
  public int outputSize() {
    return tokens * out;
  }

  @Override
  public List<ParamSpec> parameters() {
    ParamSpec.Init biasInit =
        weightInit == ParamSpec.Init.TRUNC_NORMAL
            ? ParamSpec.Init.ZEROS
            : ParamSpec.Init.FAN_IN_UNIFORM;
    return List.of(
        new ParamSpec(name + ".weight", new int[] {out, in}, weightInit, in),
        new ParamSpec(name + ".bias", new int[] {out}, biasInit, in));
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    weight = params.value(name + ".weight");
    bias = params.value(name + ".bias");
    weightGrad = params.grad(name + ".weight");
    biasGrad = params.grad(name + ".bias");
    long rows = (long) maxBatch * tokens;
    y = own("out", rows * out);
    dx = inputGradient(rows * in);
    if (precision == Precision.BF16) {
      xHalf = own("in.bf16", DType.BF16, rows * in);
      dyHalf = own("grad.bf16", DType.BF16, rows * out);
      if (weight.dtype() != DType.BF16) { // streamed bf16 weights are bf16 already
        weightHalf = own("weight.bf16", DType.BF16, (long) out * in);
      }
    }
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer input, int batch, boolean training) {
    int rows = Math.multiplyExact(batch, tokens);
    DeviceBuffer yb = y.view(0, (long) rows * out);
    if (precision == Precision.BF16) {
      x = Precision.inBf16(backend, s, input, xHalf);
      wh = Precision.inBf16(backend, s, weight, weightHalf);
    } else {
      x = input;
      wh = weight;
    }
    // y [rows, out] = x [rows, in] · Wᵀ (W [out, in])
    backend.run(
        s,
        new Gemm(
            rows,
            out,
            in,
            1f,
            GemmOperand.of(x, in),
            GemmOperand.of(wh, in).transposed(),
            0f,
            GemmOperand.of(yb, out)));
    backend.run(s, new AddBias(yb, bias, rows, out));
    if (precision == Precision.BF16) {
      Precision.round(backend, s, yb, dyHalf);
    }
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    int rows = Math.multiplyExact(batch, tokens);
    float add = freshGradients ? 0f : 1f; // a GEMM that overwrites need not read dW back
    freshGradients = false;
    backend.run(s, new SumRows(dy, biasGrad, rows, out, add)); // db (+)= Σ dy
    DeviceBuffer g = precision == Precision.BF16 ? Precision.inBf16(backend, s, dy, dyHalf) : dy;
    backend.run(
        s,
        new Gemm(
            out,
            in,
            rows,
            1f,
            GemmOperand.of(g, out).transposed(),
            GemmOperand.of(x, in),
            add,
            GemmOperand.of(weightGrad, in))); // dW (+)= dyᵀ x
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, (long) rows * in);
    backend.run(
        s,
        new Gemm(
            rows,
            in,
            out,
            1f,
            GemmOperand.of(g, out),
            GemmOperand.of(wh, in),
            0f,
            GemmOperand.of(dxb, in))); // dx = dy W
    if (precision == Precision.BF16) {
      Precision.round(backend, s, dxb, xHalf); // the bf16 input has served dW
    }
    return dxb;
  }
}
