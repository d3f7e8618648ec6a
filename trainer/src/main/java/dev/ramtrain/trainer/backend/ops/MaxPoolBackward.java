package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * Routes {@code dy} to the winners recorded by {@link MaxPool}; {@code dx} is overwritten. The
 * tensors are in the layout {@code channelBlock} says, as the forward's were.
 */
public record MaxPoolBackward(
    DeviceBuffer dy,
    DeviceBuffer argmax,
    int n,
    int c,
    int h,
    int w,
    int oh,
    int ow,
    DeviceBuffer dx,
    int channelBlock)
    implements Operation {
  /** Over NCHW tensors. */
  public MaxPoolBackward(
      DeviceBuffer dy,
      DeviceBuffer argmax,
      int n,
      int c,
      int h,
      int w,
      int oh,
      int ow,
      DeviceBuffer dx) {
    this(dy, argmax, n, c, h, w, oh, ow, dx, 1);
  }

  public MaxPoolBackward {
    checkChannelBlock(channelBlock, c);
    checkF32(dy, (long) n * c * oh * ow);
    checkCount(argmax, (long) n * c * oh * ow);
    requireType(argmax, DType.I32);
    checkF32(dx, (long) n * c * h * w);
  }
}
