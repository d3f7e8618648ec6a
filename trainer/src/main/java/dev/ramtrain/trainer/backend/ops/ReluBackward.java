package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** {@code dx = x > 0 ? dy : 0}. */
public record ReluBackward(DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx) implements Operation {
  public ReluBackward {
    checkF32(x, x.count());
    checkF32(dy, x.count());
    checkF32(dx, x.count());
  }
}
