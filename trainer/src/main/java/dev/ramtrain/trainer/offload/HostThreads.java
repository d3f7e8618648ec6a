package dev.ramtrain.trainer.offload;

import java.util.concurrent.ForkJoinPool;
import java.util.stream.IntStream;

/** The host threads an offloaded model's optimizer and gradient clipping run on. */
public final class HostThreads implements AutoCloseable {
  /** Elements per task: large enough to amortize the fork, small enough to balance. */
  private static final int CHUNK = 1 << 16;

  /** A loop over elements [from, to). */
  public interface Range {
    void run(int from, int to);
  }

  private final ForkJoinPool pool;

  public HostThreads(int threads) {
    if (threads < 1) {
      throw new IllegalArgumentException("host threads must be >= 1, got " + threads);
    }
    this.pool = new ForkJoinPool(threads);
  }

  /** Runs {@code body} over [from, to) in chunks across the threads; returns when all are done. */
  public void forRange(int from, int to, Range body) {
    int chunks = (to - from + CHUNK - 1) / CHUNK;
    if (chunks <= 1) {
      body.run(from, to);
      return;
    }
    pool.submit(
            () ->
                IntStream.range(0, chunks)
                    .parallel()
                    .forEach(c -> body.run(from + c * CHUNK, Math.min(to, from + (c + 1) * CHUNK))))
        .join();
  }

  /** Runs {@code body} for each of [0, n) across the threads; returns when all are done. */
  public void forEach(int n, java.util.function.IntConsumer body) {
    pool.submit(() -> IntStream.range(0, n).parallel().forEach(body)).join();
  }

  /** Runs {@code task} on one of the threads, beside whatever else runs there. */
  java.util.concurrent.Future<?> submit(Runnable task) {
    return pool.submit(task);
  }

  /** Waits for {@code task}; its failure is rethrown as it was thrown. */
  static void join(java.util.concurrent.Future<?> task) {
    try {
      task.get();
    } catch (java.util.concurrent.ExecutionException e) {
      if (e.getCause() instanceof RuntimeException r) {
        throw r;
      }
      if (e.getCause() instanceof Error err) {
        throw err;
      }
      throw new IllegalStateException(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while the host threads worked", e);
    }
  }

  @Override
  public void close() {
    pool.shutdown();
  }
}
