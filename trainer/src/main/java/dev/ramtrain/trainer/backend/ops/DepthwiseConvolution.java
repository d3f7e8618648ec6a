package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * A depthwise k×k convolution with stride 1 and "same" padding, as nn.Conv2d(c, c, k, padding=k/2,
 * groups=c) without its bias, from NCHW x [n, c, h, w] and weight [c, 1, k, k] into channels-last y
 * [n, h, w, c] (overwritten): ConvNeXt's {@code conv_dw}, whose output its permute makes channels
 * last. Each output sums its in-image taps in row order (padding contributes nothing), in fp32, on
 * every engine.
 */
public record DepthwiseConvolution(
    DeviceBuffer x, DeviceBuffer weight, DeviceBuffer y, int n, int c, int h, int w, int k)
    implements Operation {
  public DepthwiseConvolution {
    checkWindow(n, c, h, w, k);
    checkF32(x, (long) n * c * h * w);
    checkF32(weight, (long) c * k * k);
    checkF32(y, (long) n * c * h * w);
  }

  static void checkWindow(int n, int c, int h, int w, int k) {
    if (n < 0 || c < 1 || h < 1 || w < 1 || k < 1 || k % 2 == 0) {
      throw new IllegalArgumentException(
          String.format(
              "depthwise convolution: n=%d c=%d h=%d w=%d k=%d (an odd k and positive sizes)",
              n, c, h, w, k));
    }
  }
}
