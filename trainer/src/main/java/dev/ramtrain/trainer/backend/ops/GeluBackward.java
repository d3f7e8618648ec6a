package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** The gradient of {@link Gelu}: {@code dx = dy * (Φ(x) + x φ(x))}. */
public record GeluBackward(DeviceBuffer x, DeviceBuffer dy, DeviceBuffer dx) implements Operation {
  public GeluBackward {
    checkF32(x, x.count());
    checkF32(dy, x.count());
    checkF32(dx, x.count());
  }
}
