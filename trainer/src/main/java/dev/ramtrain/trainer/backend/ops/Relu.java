package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** {@code y = max(x, 0)}. {@code y} may be {@code x}. */
public record Relu(DeviceBuffer x, DeviceBuffer y) implements Operation {
  public Relu {
    checkF32(x, x.count());
    checkF32(y, x.count());
  }
}
