package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.data.LoaderSpec.Remainder;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The small-folder case the issue measured, and the cases that need no word. */
class RemainderNoticeTest {
  @Test
  void aBatchOf256On328SamplesSaysWhatIsLeftOut() {
    String notice = RemainderNotice.of(328, 256, 1, Remainder.DROP).orElseThrow();
    assertTrue(
        notice.contains("steps of 256 samples on 328 training samples: 1 step an epoch"), notice);
    assertTrue(notice.contains("72 samples (22%) left out"), notice);
    assertTrue(notice.contains("--batch-size") && notice.contains("remainder=pad"), notice);
  }

  @Test
  void accumulationMakesTheStep() {
    String notice = RemainderNotice.of(1_000, 128, 3, Remainder.DROP).orElseThrow();
    assertTrue(notice.contains("steps of 384 samples on 1,000 training samples: 2 steps"), notice);
    assertTrue(notice.contains("232 samples (23%)"), notice);
  }

  @Test
  void littleLeftOutPaddingOrNoFullStepNeedNoNotice() {
    assertEquals(Optional.empty(), RemainderNotice.of(60_000, 256, 1, Remainder.DROP));
    assertEquals(Optional.empty(), RemainderNotice.of(328, 256, 1, Remainder.PAD));
    assertEquals(Optional.empty(), RemainderNotice.of(100, 256, 1, Remainder.DROP));
  }
}
