package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gemm;

/**
 * Global average pooling of NCHW activations to one value per channel, as nn.AdaptiveAvgPool2d(1)
 * followed by flatten. Both directions are one GEMM against a vector of ones: the means are x [n·c,
 * hw] · 1/hw, and the gradient spreads dy [n·c, 1] over the positions.
 */
public final class GlobalAvgPool extends BaseLayer {
  private final int c;
  private final int hw;
  private DeviceBuffer ones;
  private DeviceBuffer y;
  private DeviceBuffer dx;

  public GlobalAvgPool(String name, int c, int h, int w) {
    super(name);
    this.c = c;
    this.hw = h * w;
  }

  @Override
  public int inputSize() {
    return c * hw;
  }

  @Override
  public int outputSize() {
    return c;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    ones = own("ones", hw);
    y = own("out", (long) maxBatch * c);
    dx = inputGradient((long) maxBatch * c * hw);
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    // Filled on every forward (hw values): bind has no stream, and with activation checkpointing
    // the buffer is shared with other layers between this layer's forward and backward.
    backend.run(s, new Fill(ones, 1f));
    int planes = batch * c;
    DeviceBuffer yb = y.view(0, planes);
    backend.run(s, new Gemm(false, false, planes, 1, hw, 1f / hw, x, hw, ones, 1, 0f, yb, 1));
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    if (!needInputGrad) {
      return null;
    }
    int planes = batch * c;
    DeviceBuffer dxb = dx.view(0, (long) planes * hw);
    backend.run(s, new Gemm(false, false, planes, hw, 1, 1f / hw, dy, 1, ones, hw, 0f, dxb, hw));
    return dxb;
  }
}
