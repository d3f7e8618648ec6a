package dev.ramtrain.threads;

import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * Waits that an interrupt does not cut short. A thread that frees native memory once a worker has
 * stopped must really wait for it: a cancelled Spark task is interrupted, and an interruptible wait
 * would return at once and free buffers the worker still writes (glibc then aborts the JVM with a
 * corrupted heap). The interrupt is kept for the caller, set again when the wait ends.
 */
public final class Uninterruptibly {
  private Uninterruptibly() {}

  /**
   * Waits until {@code pool}, already shut down, has run its last task, or {@code limit} has
   * passed; returns whether it terminated.
   */
  public static boolean awaitTermination(ExecutorService pool, Duration limit) {
    long start = System.nanoTime();
    long limitNanos = limit.toNanos();
    boolean interrupted = false;
    try {
      while (true) {
        try {
          // start + limit could overflow for a long limit; the time left cannot.
          return pool.awaitTermination(
              limitNanos - (System.nanoTime() - start), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Waits until {@code future} is done, whatever its outcome (left for the caller to read). A
   * future cancelled while it ran is done at once: wait for its executor instead.
   */
  public static void awaitDone(Future<?> future) {
    boolean interrupted = false;
    try {
      while (true) {
        try {
          future.get();
          return;
        } catch (InterruptedException e) {
          interrupted = true;
        } catch (ExecutionException | CancellationException e) {
          return;
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
