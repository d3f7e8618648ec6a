package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import java.util.List;

/** {@code y = x Wᵀ + b} with W stored [out, in], as PyTorch's nn.Linear. */
public final class Linear extends BaseLayer {
  private final int in;
  private final int out;
  private DeviceBuffer weight;
  private DeviceBuffer bias;
  private DeviceBuffer weightGrad;
  private DeviceBuffer biasGrad;
  private DeviceBuffer y;
  private DeviceBuffer dx;
  private DeviceBuffer x; // the last forward's input, kept for backward

  public Linear(String name, int in, int out) {
    super(name);
    if (in < 1 || out < 1) {
      throw new IllegalArgumentException(
          name + ": features must be positive, got " + in + " -> " + out);
    }
    this.in = in;
    this.out = out;
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
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer input, int batch, boolean training) {
    x = input;
    DeviceBuffer yb = y.view(0, (long) batch * out);
    backend.gemm(s, false, true, batch, out, in, 1f, input, in, weight, in, 0f, yb, out);
    backend.addBias(s, yb, bias, batch, out);
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    backend.gemm(
        s, true, false, out, in, batch, 1f, dy, out, x, in, 1f, weightGrad, in); // dW += dyᵀ x
    backend.sumRows(s, dy, biasGrad, batch, out, 1f); // db += Σ dy
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, (long) batch * in);
    backend.gemm(
        s, false, false, batch, in, out, 1f, dy, out, weight, in, 0f, dxb, in); // dx = dy W
    return dxb;
  }
}
