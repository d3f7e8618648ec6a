package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Softmax over each row of a rows×cols matrix, {@code y = exp(x - max) / Σ exp(x - max)} (the
 * attention probabilities of a row of scores); {@code y} may be {@code x}.
 */
public record Softmax(DeviceBuffer x, int rows, int cols, DeviceBuffer y) implements Operation {
  public Softmax {
    if (rows < 0 || cols < 1) {
      throw new IllegalArgumentException("softmax over " + rows + " rows of " + cols);
    }
    checkF32(x, (long) rows * cols);
    checkF32(y, (long) rows * cols);
  }
}
