package dev.ramtrain.trainer.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.SlowWork;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

class CpuStreamTest {
  /**
   * A cancelled Spark task closes the backend from an interrupted thread. The stream must still
   * drain before close returns: the backend frees oneDNN's objects and the buffers next, and work
   * still running on them corrupted the heap (glibc aborted the JVM in RamTrainTest's cancel).
   */
  @Test
  void anInterruptedCloseWaitsForTheWorkInFlight() throws InterruptedException {
    CountDownLatch running = new CountDownLatch(1);
    AtomicBoolean workEnded = new AtomicBoolean();
    AtomicBoolean releasedAfter = new AtomicBoolean();
    CpuStream stream = new CpuStream("interrupted", () -> releasedAfter.set(workEnded.get()));
    stream.enqueue(
        () -> {
          running.countDown();
          SlowWork.run(200);
          workEnded.set(true);
        });
    running.await();
    Thread.currentThread().interrupt();
    try {
      stream.close();
    } finally {
      assertTrue(Thread.interrupted(), "the interrupt is kept for the caller");
    }
    assertTrue(workEnded.get(), "close returned while the stream's work still ran");
    assertTrue(releasedAfter.get(), "the release on the stream's thread ran after its work");
  }
}
