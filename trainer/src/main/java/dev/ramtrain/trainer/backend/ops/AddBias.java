package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** {@code y[r, c] += bias[c]} for a rows×cols matrix. */
public record AddBias(DeviceBuffer y, DeviceBuffer bias, int rows, int cols) implements Operation {
  public AddBias {
    checkF32(y, (long) rows * cols);
    checkF32(bias, cols);
  }
}
