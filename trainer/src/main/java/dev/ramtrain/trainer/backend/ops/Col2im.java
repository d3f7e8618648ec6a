package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** The adjoint of {@link Im2col}: sums the columns back into {@code dx} (overwritten). */
public record Col2im(DeviceBuffer cols, ConvWindow window, DeviceBuffer dx) implements Operation {
  public Col2im {
    checkF32(cols, window.columnCount());
    checkF32(dx, window.inputCount());
  }
}
