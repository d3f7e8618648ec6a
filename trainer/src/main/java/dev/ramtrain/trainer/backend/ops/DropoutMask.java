package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Fills {@code mask} for inverted dropout with drop probability {@code p}: element i is 0 when
 * {@link dev.ramtrain.trainer.backend.CounterRng#uniform CounterRng.uniform(seed, i)} {@code < p},
 * else {@code 1 / (1 - p)}. Counter-based, so every engine draws the same mask for the same seed,
 * whatever its threading.
 */
public record DropoutMask(float p, long seed, DeviceBuffer mask) implements Operation {
  public DropoutMask {
    if (!(p >= 0 && p < 1)) {
      throw new IllegalArgumentException("dropout probability must be in [0, 1), got " + p);
    }
    checkF32(mask, mask.count());
  }

  /** What a kept element is scaled by. */
  public float keepScale() {
    return 1 / (1 - p);
  }
}
