package dev.ramtrain.trainer.offload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.SlowWork;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class HostUpdateQueueTest {
  /** A gradient that has landed already. */
  private static final class Landed implements Event {
    @Override
    public void record(Stream stream) {}

    @Override
    public void synchronize() {}

    @Override
    public boolean isDone() {
      return true;
    }

    @Override
    public double millisSince(Event start) {
      return 0;
    }

    @Override
    public void close() {}
  }

  /**
   * A failed layer update is reported only once the updates queued after it have ended: the caller,
   * told of the failure, saves or frees the weights they write.
   */
  @Test
  void aFailureIsReportedAfterEveryQueuedUpdateHasEnded() {
    List<String> ran = new ArrayList<>();
    try (HostUpdateQueue queue = new HostUpdateQueue()) {
      queue.submit(
          new Landed(),
          0,
          1,
          (from, to) -> {
            throw new IllegalStateException("layer 0 diverged");
          },
          false,
          () -> {});
      queue.submit(
          new Landed(),
          1,
          2,
          (from, to) -> {
            SlowWork.run(200);
            ran.add("update " + from);
          },
          false,
          () -> ran.add("copies"));
      IllegalStateException e = assertThrows(IllegalStateException.class, queue::awaitAll);
      assertTrue(e.getMessage().contains("layer 0 diverged"), e.getMessage());
      assertEquals(List.of("update 1", "copies"), ran, "the second layer's work had ended");
    }
  }
}
