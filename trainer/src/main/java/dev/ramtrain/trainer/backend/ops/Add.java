package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** {@code out = a + b} elementwise ({@code out} may be {@code a} or {@code b}): residual sums. */
public record Add(DeviceBuffer a, DeviceBuffer b, DeviceBuffer out) implements Operation {
  public Add {
    checkF32(a, out.count());
    checkF32(b, out.count());
    checkF32(out, out.count());
  }
}
