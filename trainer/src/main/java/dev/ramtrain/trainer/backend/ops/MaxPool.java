package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;
import static dev.ramtrain.trainer.backend.ArgumentChecks.convOut;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * k×k max pooling of NCHW input (no padding); {@code argmax} (I32) records each winner's index in
 * its plane.
 */
public record MaxPool(
    DeviceBuffer x,
    int n,
    int c,
    int h,
    int w,
    int k,
    int stride,
    DeviceBuffer y,
    DeviceBuffer argmax)
    implements Operation {
  public MaxPool {
    long out = (long) n * c * convOut(h, k, stride, 0) * convOut(w, k, stride, 0);
    checkF32(x, (long) n * c * h * w);
    checkF32(y, out);
    checkCount(argmax, out);
    requireType(argmax, DType.I32);
  }

  public int oh() {
    return convOut(h, k, stride, 0);
  }

  public int ow() {
    return convOut(w, k, stride, 0);
  }
}
