package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;

/**
 * Global average pooling of 4-D activations to one value per channel, as nn.AdaptiveAvgPool2d(1)
 * followed by flatten. Both directions are GEMMs against a vector of ones: over NCHW, the means are
 * x [n·c, hw] · 1/hw, and the gradient spreads dy [n·c, 1] over the positions; with channels
 * blocked by b ({@link ChannelLayout}), each block of b channels [hw, b] is one GEMM of a batch
 * (1/hw · 1ᵀ x), and its means land where NCHW's would: [n, c/b, b] is [n, c].
 */
public final class GlobalAvgPool extends BaseLayer {
  private final int c;
  private final int hw;
  private final ChannelLayout layout;
  private int block = 1;
  private DeviceBuffer ones;
  private DeviceBuffer y;
  private DeviceBuffer dx;

  public GlobalAvgPool(String name, int c, int h, int w) {
    this(name, c, h, w, ChannelLayout.NCHW);
  }

  public GlobalAvgPool(String name, int c, int h, int w, ChannelLayout layout) {
    super(name);
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
    return c;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    block = layout.block(backend, c);
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
    if (block == 1) {
      backend.run(
          s,
          new Gemm(
              planes,
              1,
              hw,
              1f / hw,
              GemmOperand.of(x, hw),
              GemmOperand.of(ones, 1),
              0f,
              GemmOperand.of(yb, 1)));
      return yb;
    }
    long blockSize = (long) hw * block;
    backend.run(
        s,
        new GemmStridedBatched(
            1,
            block,
            hw,
            1f / hw,
            GemmOperand.of(ones, hw),
            GemmOperand.of(x, block).strided(blockSize),
            0f,
            GemmOperand.of(yb, block).strided(block),
            planes / block));
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    if (!needInputGrad) {
      return null;
    }
    int planes = batch * c;
    DeviceBuffer dxb = dx.view(0, (long) planes * hw);
    if (block == 1) {
      backend.run(
          s,
          new Gemm(
              planes,
              hw,
              1,
              1f / hw,
              GemmOperand.of(dy, 1),
              GemmOperand.of(ones, hw),
              0f,
              GemmOperand.of(dxb, hw)));
      return dxb;
    }
    backend.run(
        s,
        new GemmStridedBatched(
            hw,
            block,
            1,
            1f / hw,
            GemmOperand.of(ones, 1),
            GemmOperand.of(dy, block).strided(block),
            0f,
            GemmOperand.of(dxb, block).strided((long) hw * block),
            planes / block));
    return dxb;
  }
}
