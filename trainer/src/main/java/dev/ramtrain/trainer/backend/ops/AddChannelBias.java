package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** {@code y[i, ch, p] += bias[ch]} for NCHW activations (n images, c channels, hw positions). */
public record AddChannelBias(DeviceBuffer y, DeviceBuffer bias, int n, int c, int hw)
    implements Operation {
  public AddChannelBias {
    checkF32(y, (long) n * c * hw);
    checkF32(bias, c);
  }
}
