package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** {@code out[c] = beta * out[c] + sum over r of x[r, c]} (the bias gradient). */
public record SumRows(DeviceBuffer x, DeviceBuffer out, int rows, int cols, float beta)
    implements Operation {
  public SumRows {
    checkF32(x, (long) rows * cols);
    checkF32(out, cols);
  }
}
