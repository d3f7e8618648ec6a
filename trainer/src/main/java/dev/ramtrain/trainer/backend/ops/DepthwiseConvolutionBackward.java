package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * The gradients of a {@link DepthwiseConvolution} from its channels-last output gradient {@code dy}
 * [n, h, w, c]: {@code weightGrad += dL/dW} (accumulated, as parameter gradients are) and {@code dx
 * = dL/dx} (NCHW, overwritten; null when no layer below needs it).
 */
public record DepthwiseConvolutionBackward(
    DeviceBuffer x,
    DeviceBuffer dy,
    DeviceBuffer weight,
    DeviceBuffer weightGrad,
    DeviceBuffer dx,
    int n,
    int c,
    int h,
    int w,
    int k)
    implements Operation {
  public DepthwiseConvolutionBackward {
    DepthwiseConvolution.checkWindow(n, c, h, w, k);
    long elements = (long) n * c * h * w;
    checkF32(x, elements);
    checkF32(dy, elements);
    checkF32(weight, (long) c * k * k);
    checkF32(weightGrad, (long) c * k * k);
    if (dx != null) {
      checkF32(dx, elements);
    }
  }
}
