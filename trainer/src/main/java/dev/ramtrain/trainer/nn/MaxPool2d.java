package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.MaxPool;
import dev.ramtrain.trainer.backend.ops.MaxPoolBackward;

/**
 * k×k max pooling of 4-D activations (NCHW, or channel-blocked as its {@link ChannelLayout}
 * allows), as nn.MaxPool2d(k, stride, padding).
 */
public final class MaxPool2d extends BaseLayer {
  private final int c;
  private final int h;
  private final int w;
  private final int k;
  private final int stride;
  private final int pad;
  private final int oh;
  private final int ow;
  private final ChannelLayout layout;
  private int block = 1;
  private DeviceBuffer y;
  private DeviceBuffer argmax;
  private DeviceBuffer dx;

  public MaxPool2d(String name, int c, int h, int w, int k, int stride) {
    this(name, c, h, w, k, stride, 0);
  }

  /** {@code pad} positions on every side that never win (ResNet's stem: 3, 2, 1). */
  public MaxPool2d(String name, int c, int h, int w, int k, int stride, int pad) {
    this(name, c, h, w, k, stride, pad, ChannelLayout.NCHW);
  }

  public MaxPool2d(
      String name, int c, int h, int w, int k, int stride, int pad, ChannelLayout layout) {
    super(name);
    if (k < 1 || stride < 1 || pad < 0 || 2 * pad > k || h + 2 * pad < k || w + 2 * pad < k) {
      throw new IllegalArgumentException(
          name + ": a " + k + "x" + k + " pool padded by " + pad + " does not fit " + h + "x" + w);
    }
    this.c = c;
    this.h = h;
    this.w = w;
    this.k = k;
    this.stride = stride;
    this.pad = pad;
    this.oh = (h + 2 * pad - k) / stride + 1;
    this.ow = (w + 2 * pad - k) / stride + 1;
    this.layout = layout;
  }

  public int outputHeight() {
    return oh;
  }

  public int outputWidth() {
    return ow;
  }

  @Override
  public int inputSize() {
    return c * h * w;
  }

  @Override
  public int outputSize() {
    return c * oh * ow;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    block = layout.block(backend, c);
    y = own("out", (long) maxBatch * outputSize());
    argmax = own("argmax", DType.I32, (long) maxBatch * outputSize());
    dx = inputGradient((long) maxBatch * inputSize());
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    DeviceBuffer yb = y.view(0, (long) batch * outputSize());
    backend.run(
        s,
        new MaxPool(
            x,
            batch,
            c,
            h,
            w,
            k,
            stride,
            pad,
            yb,
            argmax.view(0, (long) batch * outputSize()),
            block));
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer dxb = dx.view(0, (long) batch * inputSize());
    backend.run(
        s,
        new MaxPoolBackward(
            dy,
            argmax.view(0, (long) batch * outputSize()),
            batch,
            c,
            h,
            w,
            k,
            stride,
            pad,
            dxb,
            block));
    return dxb;
  }
}
