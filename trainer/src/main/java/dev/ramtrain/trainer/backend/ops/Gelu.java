package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** Exact (erf) GELU, as PyTorch's default: {@code y = x * Φ(x)}. {@code y} may be {@code x}. */
public record Gelu(DeviceBuffer x, DeviceBuffer y) implements Operation {
  public Gelu {
    checkF32(x, x.count());
    checkF32(y, x.count());
  }
}
