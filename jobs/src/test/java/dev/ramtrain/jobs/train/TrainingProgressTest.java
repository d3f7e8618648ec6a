package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class TrainingProgressTest {
  @Test
  void stepsRateAndEtaFromWhatRankZeroReported() {
    assertEquals("train: the ranks are starting", TrainingProgress.text(0, 0, 3));
    // 120 of 600 steps in 60 s: 2 steps/s, 480 steps left = 4 minutes.
    assertEquals(
        "train 120/600 steps  2.0 steps/s  elapsed 0:01:00  ETA 0:04:00",
        TrainingProgress.text(120, 600, 60));
    assertEquals(
        "train 600/600 steps  5.0 steps/s  elapsed 0:02:00  ETA -",
        TrainingProgress.text(600, 600, 120));
  }
}
