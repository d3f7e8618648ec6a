package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * The backward pass of {@link Softmax} from its output: {@code dx = y * (dy - Σ dy * y)} per row;
 * {@code dx} may be {@code dy}.
 */
public record SoftmaxBackward(DeviceBuffer y, DeviceBuffer dy, int rows, int cols, DeviceBuffer dx)
    implements Operation {
  public SoftmaxBackward {
    if (rows < 0 || cols < 1) {
      throw new IllegalArgumentException("softmax over " + rows + " rows of " + cols);
    }
    checkF32(y, (long) rows * cols);
    checkF32(dy, (long) rows * cols);
    checkF32(dx, (long) rows * cols);
  }
}
