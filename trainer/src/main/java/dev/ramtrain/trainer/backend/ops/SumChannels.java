package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** {@code out[ch] += sum over i, p of dy[i, ch, p]} (the convolution's bias gradient). */
public record SumChannels(DeviceBuffer dy, DeviceBuffer out, int n, int c, int hw)
    implements Operation {
  public SumChannels {
    checkF32(dy, (long) n * c * hw);
    checkF32(out, c);
  }
}
