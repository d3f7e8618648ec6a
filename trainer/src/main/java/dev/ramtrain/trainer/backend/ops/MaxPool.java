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
 * k×k max pooling of NCHW input with {@code pad} positions of padding that never win
 * (nn.MaxPool2d's implicit -inf: ResNet's 3×3/2 stem pooling pads 1); {@code argmax} (I32) records
 * each winner's index in its plane. Ties: the first of the window's in-plane values wins unless a
 * later one is strictly greater. NaNs differ by engine: the Java kernels' 2×2 loop passes on any
 * NaN of its window, as PyTorch does; CUDA's keeps one only where it comes first (the rule above);
 * oneDNN's never picks one. x and y are in the layout {@code channelBlock} says ({@link
 * BatchNormTrain}). Where oneDNN pools (channels blocked, or NCHW on CPUs where its kernel is the
 * faster), argmax holds that engine's own record of the winners, which only its {@link
 * MaxPoolBackward} reads.
 */
public record MaxPool(
    DeviceBuffer x,
    int n,
    int c,
    int h,
    int w,
    int k,
    int stride,
    int pad,
    DeviceBuffer y,
    DeviceBuffer argmax,
    int channelBlock)
    implements Operation {
  /** Over NCHW input. */
  public MaxPool(
      DeviceBuffer x,
      int n,
      int c,
      int h,
      int w,
      int k,
      int stride,
      int pad,
      DeviceBuffer y,
      DeviceBuffer argmax) {
    this(x, n, c, h, w, k, stride, pad, y, argmax, 1);
  }

  /** Over NCHW input, without padding. */
  public MaxPool(
      DeviceBuffer x,
      int n,
      int c,
      int h,
      int w,
      int k,
      int stride,
      DeviceBuffer y,
      DeviceBuffer argmax) {
    this(x, n, c, h, w, k, stride, 0, y, argmax, 1);
  }

  public MaxPool {
    checkChannelBlock(channelBlock, c);
    if (pad < 0 || 2 * pad > k) {
      throw new IllegalArgumentException(
          "max pooling pads at most half its window (" + k + "), got " + pad);
    }
    long out = (long) n * c * convOut(h, k, stride, pad) * convOut(w, k, stride, pad);
    checkF32(x, (long) n * c * h * w);
    checkF32(y, out);
    checkCount(argmax, out);
    requireType(argmax, DType.I32);
  }

  public int oh() {
    return convOut(h, k, stride, pad);
  }

  public int ow() {
    return convOut(w, k, stride, pad);
  }
}
