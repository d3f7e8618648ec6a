package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.StridedCopy;
import dev.ramtrain.trainer.backend.ops.StridedCopy.Strides;

/**
 * A sample's NCHW activations to channels-last [h·w, c] rows (a transformer's tokens), or back:
 * timm's ConvNeXt block runs its norm and MLP on {@code x.permute(0, 2, 3, 1)}. No parameters; the
 * gradient takes the opposite permute.
 */
public final class ChannelsLast extends BaseLayer {
  private final int c;
  private final int hw;
  private final boolean toLast; // NCHW to [hw, c]; else back
  private DeviceBuffer out;
  private DeviceBuffer dx;

  private ChannelsLast(String name, int c, int h, int w, boolean toLast) {
    super(name);
    this.c = c;
    this.hw = Math.multiplyExact(h, w);
    this.toLast = toLast;
  }

  /** NCHW to channels-last rows. */
  public static ChannelsLast from(String name, int c, int h, int w) {
    return new ChannelsLast(name, c, h, w, true);
  }

  /** Channels-last rows back to NCHW. */
  public static ChannelsLast back(String name, int c, int h, int w) {
    return new ChannelsLast(name, c, h, w, false);
  }

  /** Backward transposes the output's gradient: it reads neither input nor output. */
  @Override
  public boolean backwardReadsOutput() {
    return false;
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
  protected void bind(ParameterSource params, int maxBatch) {
    out = own("out", (long) maxBatch * outputSize());
    dx = inputGradient((long) maxBatch * inputSize());
  }

  /** Copies {@code src} into {@code dst}, NCHW to channels-last when {@code last}. */
  private void permute(Stream s, DeviceBuffer src, DeviceBuffer dst, int batch, boolean last) {
    Strides planar = new Strides(inputSize(), 1, hw); // element (position p, channel ch) of NCHW
    Strides rows = new Strides(inputSize(), c, 1); // the same element, channels last
    backend.run(
        s,
        new StridedCopy(src, last ? planar : rows, dst, last ? rows : planar, batch, hw, c, false));
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    DeviceBuffer y = out.view(0, (long) batch * outputSize());
    permute(s, x, y, batch, toLast);
    return y;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    if (!needInputGrad) {
      return null;
    }
    DeviceBuffer g = dx.view(0, (long) batch * inputSize());
    permute(s, dy, g, batch, !toLast);
    return g;
  }
}
