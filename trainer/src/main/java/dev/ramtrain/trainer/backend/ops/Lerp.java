package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * {@code target += weight · (source − target)} elementwise, as one fused multiply-add (torch's
 * {@code lerp_}): an exponential moving average of weights, {@code weight} = 1 − decay. Fused, so
 * the host's {@code Math.fma} gives the same bits.
 */
public record Lerp(DeviceBuffer target, DeviceBuffer source, float weight) implements Operation {
  public Lerp {
    checkF32(target, target.count());
    checkF32(source, target.count());
    if (!(weight >= 0 && weight <= 1)) {
      throw new IllegalArgumentException("lerp weight " + weight + " outside [0, 1]");
    }
  }
}
