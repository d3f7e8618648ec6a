package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;
import static dev.ramtrain.trainer.backend.ArgumentChecks.convOut;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Routes {@code dy} to the winners recorded by the {@link MaxPool} of the same window ({@code k},
 * {@code stride}, {@code pad}: an engine that keeps its winners in its own form needs it); {@code
 * dx} is overwritten. The tensors are in the layout {@code channelBlock} says, as the forward's
 * were.
 */
public record MaxPoolBackward(
    DeviceBuffer dy,
    DeviceBuffer argmax,
    int n,
    int c,
    int h,
    int w,
    int k,
    int stride,
    int pad,
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
      int k,
      int stride,
      int pad,
      DeviceBuffer dx) {
    this(dy, argmax, n, c, h, w, k, stride, pad, dx, 1);
  }

  public MaxPoolBackward {
    checkChannelBlock(channelBlock, c);
    long out = (long) n * c * convOut(h, k, stride, pad) * convOut(w, k, stride, pad);
    checkF32(dy, out);
    checkCount(argmax, out);
    requireType(argmax, DType.I32);
    checkF32(dx, (long) n * c * h * w);
  }

  public int oh() {
    return convOut(h, k, stride, pad);
  }

  public int ow() {
    return convOut(w, k, stride, pad);
  }
}
