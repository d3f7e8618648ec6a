package dev.ramtrain.trainer.optim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/**
 * The decay schedule against timm's ModelEmaV3.get_decay (use_warmup, warmup_gamma 1, warmup_power
 * 2/3, update_after_step 0), written out here: {@code step = max(0, n − 1)}; {@code 0} at step 0;
 * else {@code min(decay, 1 − (1 + step)^(−2/3))}. The weight is {@code 1 − decay}.
 */
class EmaDecayTest {
  private static double timmDecay(double decay, long n) {
    long step = Math.max(0, n - 1);
    if (step <= 0) {
      return 0;
    }
    return Math.min(decay, 1 - Math.pow(1 + step, -2.0 / 3));
  }

  @Test
  void warmUpFollowsTimmsModelEmaV3() {
    EmaDecay warm = new EmaDecay(0.9998f, true);
    assertEquals(1f, warm.weightAt(1), "the first update copies the weights");
    for (long n : new long[] {2, 3, 10, 60, 1000, 23_000}) {
      assertEquals((float) (1 - timmDecay(0.9998f, n)), warm.weightAt(n), "update " + n);
    }
    assertEquals(0.62996054f, warm.weightAt(2), 1e-7f, "2^(-2/3)");
    // past (1 - decay)^(-3/2) updates the decay is ema's own, as without warm-up
    assertEquals(1 - 0.9998f, warm.weightAt(400_000));
    assertEquals(1 - 0.9f, new EmaDecay(0.9f, true).weightAt(100));
  }

  @Test
  void withoutWarmUpTheDecayIsTheSameFromTheFirstUpdate() {
    EmaDecay plain = new EmaDecay(0.9998f, false);
    assertEquals(1 - 0.9998f, plain.weightAt(1));
    assertEquals(1 - 0.9998f, plain.weightAt(1_000_000));
    assertThrows(IllegalArgumentException.class, () -> plain.weightAt(0));
    assertThrows(IllegalArgumentException.class, () -> new EmaDecay(1f, true));
  }
}
