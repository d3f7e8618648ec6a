package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.LayerNormBackward;
import java.util.List;

/**
 * nn.LayerNorm over a transformer's features ({@link #overFeatures}: each of a sample's tokens
 * normalized alone) or timm's LayerNorm2d over the channels of NCHW ({@link #overChannels}: each
 * position normalized across channels), with a weight and bias per feature. Keeps its input and the
 * per-group statistics for backward, as PyTorch saves them.
 */
public final class LayerNorm extends BaseLayer {
  private final int groupsPerSample; // tokens, or 1 for NCHW
  private final int size; // features or channels
  private final int inner; // 1, or h·w for NCHW
  private final float eps;
  private DeviceBuffer weight;
  private DeviceBuffer bias;
  private DeviceBuffer weightGrad;
  private DeviceBuffer biasGrad;
  private DeviceBuffer y;
  private DeviceBuffer dx;
  private DeviceBuffer mean;
  private DeviceBuffer invStd;
  private DeviceBuffer x;

  private LayerNorm(String name, int groupsPerSample, int size, int inner, float eps) {
    super(name);
    if (groupsPerSample < 1 || size < 1 || inner < 1 || !(eps > 0)) {
      throw new IllegalArgumentException(
          name + ": layer norm of " + size + " features, eps " + eps + ", needs both positive");
    }
    this.groupsPerSample = groupsPerSample;
    this.size = size;
    this.inner = inner;
    this.eps = eps;
  }

  /** Each of {@code tokens} rows of {@code features} normalized alone (nn.LayerNorm(features)). */
  public static LayerNorm overFeatures(String name, int tokens, int features, float eps) {
    return new LayerNorm(name, tokens, features, 1, eps);
  }

  /** Each position of c×h×w NCHW activations normalized across its channels (LayerNorm2d). */
  public static LayerNorm overChannels(String name, int channels, int h, int w, float eps) {
    return new LayerNorm(name, 1, channels, Math.multiplyExact(h, w), eps);
  }

  @Override
  public int inputSize() {
    return groupsPerSample * size * inner;
  }

  @Override
  public int outputSize() {
    return inputSize();
  }

  @Override
  public List<ParamSpec> parameters() {
    return List.of(
        new ParamSpec(name + ".weight", new int[] {size}, ParamSpec.Init.ONES, 0),
        new ParamSpec(name + ".bias", new int[] {size}, ParamSpec.Init.ZEROS, 0));
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    weight = params.value(name + ".weight");
    bias = params.value(name + ".bias");
    weightGrad = params.grad(name + ".weight");
    biasGrad = params.grad(name + ".bias");
    y = own("out", (long) maxBatch * inputSize());
    dx = inputGradient((long) maxBatch * inputSize());
    mean = own("mean", (long) maxBatch * groupsPerSample * inner);
    invStd = own("inv-std", (long) maxBatch * groupsPerSample * inner);
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer input, int batch, boolean training) {
    x = input;
    int outer = Math.multiplyExact(batch, groupsPerSample);
    DeviceBuffer yb = y.view(0, (long) batch * inputSize());
    backend.run(
        s,
        new dev.ramtrain.trainer.backend.ops.LayerNormForward(
            input,
            outer,
            size,
            inner,
            weight,
            bias,
            eps,
            yb,
            stats(mean, batch),
            stats(invStd, batch)));
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    int outer = Math.multiplyExact(batch, groupsPerSample);
    DeviceBuffer dxb = dx.view(0, (long) batch * inputSize());
    // dx is computed either way: the operation yields it with the weight gradients in one pass.
    backend.run(
        s,
        new LayerNormBackward(
            x,
            dy,
            outer,
            size,
            inner,
            weight,
            stats(mean, batch),
            stats(invStd, batch),
            weightGrad,
            biasGrad,
            dxb));
    return needInputGrad ? dxb : null;
  }

  private DeviceBuffer stats(DeviceBuffer perGroup, int batch) {
    return perGroup.view(0, (long) batch * groupsPerSample * inner);
  }
}
