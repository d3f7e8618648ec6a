package dev.ramtrain.trainer.optim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class LrScheduleTest {
  @Test
  void stepDecay() {
    LrSchedule s = LrSchedule.stepDecay(0.1, 10, 0.5);
    assertEquals(0.1, s.lr(0), 1e-12);
    assertEquals(0.1, s.lr(9), 1e-12);
    assertEquals(0.05, s.lr(10), 1e-12);
    assertEquals(0.025, s.lr(25), 1e-12);
  }

  @Test
  void cosineWithWarmup() {
    LrSchedule s = LrSchedule.cosine(1.0, 4, 104, 0.0);
    assertEquals(0.25, s.lr(0), 1e-12, "linear warm-up");
    assertEquals(1.0, s.lr(3), 1e-12);
    assertEquals(1.0, s.lr(4), 1e-12, "peak after warm-up");
    assertEquals(0.5, s.lr(54), 1e-12, "half-way down the cosine");
    assertEquals(0.0, s.lr(104), 1e-12);
  }

  @Test
  void oneCycleMatchesPyTorchsEndpoints() {
    // torch.optim.lr_scheduler.OneCycleLR(max_lr=0.1, total_steps=100) with its defaults:
    // starts at max_lr/25 = 0.004, peaks at step 29 (pct_start 0.3), ends at 0.004/1e4 = 4e-7.
    LrSchedule s = LrSchedule.oneCycle(0.1, 100, 0.3, 25, 1e4);
    assertEquals(0.004, s.lr(0), 1e-12);
    assertEquals(0.1, s.lr(29), 1e-12);
    assertEquals(4e-7, s.lr(99), 1e-12);
    for (int i = 1; i < 29; i++) {
      assertTrue(s.lr(i) > s.lr(i - 1), "rising before the peak");
    }
    for (int i = 30; i < 100; i++) {
      assertTrue(s.lr(i) < s.lr(i - 1), "falling after the peak");
    }
  }
}
