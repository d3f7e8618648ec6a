package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The progress line's ETA leaves the warm-up of the first step out. */
class TrainerEtaTest {
  private static final long SECOND = 1_000_000_000L;

  @Test
  void theFirstStepsWarmUpDoesNotInflateTheEstimate() {
    // The first step was enqueued at t = 10 s after a 10 s warm-up; steps 2..11 took 1 s each.
    long first = 10 * SECOND;
    assertEquals("0:01:40", Trainer.eta(first + 10 * SECOND, first, 1, 11, 100));
    // Counting from the epoch's start instead would say 100 x 20 s / 11 = 3:01.
    assertEquals("-", Trainer.eta(first + SECOND, first, 1, 2, 100), "one timed step: no guess");
    assertEquals("-", Trainer.eta(first, 0, 0, 5, 100), "no step yet");
    // A resumed epoch starts at its batch: steps are counted from there.
    assertEquals("0:00:10", Trainer.eta(first + 4 * SECOND, first, 41, 45, 10));
  }
}
