package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** Every element of {@code x} set to {@code value}. */
public record Fill(DeviceBuffer x, float value) implements Operation {
  public Fill {
    requireType(x, DType.F32);
  }
}
