package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class SampleRateTest {
  private static final long MS = 1_000_000L;

  /**
   * Five pipelined steps of 32 samples, 100 ms of device work each, the first enqueued at 0: the
   * logged fifth step is enqueued at 40 ms and its result is read at 500 ms, when all five are
   * done. 160 samples in 500 ms is 320/s; the logged step's own 460 ms would say 70/s.
   */
  @Test
  void aRecordCountsEverySampleSinceThePreviousOverTheTimeSince() {
    SampleRate rate = new SampleRate();
    rate.restart(0);
    for (int step = 0; step < 5; step++) {
      rate.add(32);
    }
    assertEquals(320, rate.take(500 * MS), 1e-9);
    rate.add(64);
    assertEquals(640, rate.take(600 * MS), 1e-9, "the next window starts at the record");
  }
}
