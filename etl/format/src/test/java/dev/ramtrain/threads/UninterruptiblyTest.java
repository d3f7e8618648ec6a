package dev.ramtrain.threads;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class UninterruptiblyTest {
  private final ExecutorService pool = Executors.newSingleThreadExecutor();
  private final CountDownLatch release = new CountDownLatch(1);
  private final CountDownLatch running = new CountDownLatch(1);
  private final AtomicBoolean ended = new AtomicBoolean();

  @AfterEach
  void stop() {
    release.countDown();
    pool.shutdownNow();
  }

  /** A task that runs until released, then marks its end. */
  private Future<?> blockedTask() throws InterruptedException {
    Future<?> task =
        pool.submit(
            () -> {
              running.countDown();
              boolean done = false;
              while (!done) {
                try {
                  release.await();
                  done = true;
                } catch (InterruptedException e) {
                  // the waits under test never interrupt the task
                }
              }
              ended.set(true);
            });
    running.await();
    return task;
  }

  /** Releases the task from another thread once this one is parked in the wait under test. */
  private void releaseWhenWaiting() {
    Thread waiter = Thread.currentThread();
    Thread releaser =
        new Thread(
            () -> {
              while (waiter.getState() != Thread.State.TIMED_WAITING
                  && waiter.getState() != Thread.State.WAITING) {
                Thread.onSpinWait();
              }
              release.countDown();
            });
    releaser.setDaemon(true);
    releaser.start();
  }

  @Test
  void anInterruptedWaitForTerminationWaitsAndKeepsTheInterrupt() throws Exception {
    blockedTask();
    pool.shutdown();
    Thread.currentThread().interrupt();
    releaseWhenWaiting();
    boolean terminated = Uninterruptibly.awaitTermination(pool, Duration.ofDays(1));
    assertTrue(Thread.interrupted(), "the interrupt is set again for the caller");
    assertTrue(terminated);
    assertTrue(ended.get(), "returned only once the task had ended");
  }

  @Test
  void aWaitForTerminationEndsAtItsLimit() throws Exception {
    blockedTask();
    pool.shutdown();
    assertFalse(Uninterruptibly.awaitTermination(pool, Duration.ofMillis(1)));
    assertFalse(ended.get());
    assertFalse(Thread.currentThread().isInterrupted());
  }

  @Test
  void anInterruptedWaitForAFutureWaitsForItsEnd() throws Exception {
    Future<?> task = blockedTask();
    Thread.currentThread().interrupt();
    releaseWhenWaiting();
    Uninterruptibly.awaitDone(task);
    assertTrue(Thread.interrupted(), "the interrupt is set again for the caller");
    assertTrue(ended.get());
  }

  @Test
  void aFailedFutureIsDoneToo() {
    Future<?> failed =
        pool.submit(
            () -> {
              throw new IllegalStateException("for the caller to read");
            });
    Uninterruptibly.awaitDone(failed);
    assertTrue(failed.isDone());
  }
}
