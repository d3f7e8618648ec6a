package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Event;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The host optimizer thread: layer updates run one after another in the order their gradients land,
 * each once its gradient's copy event has completed. An update also refreshes the layer's copies
 * the device loads from (published weights, bf16 copies): after updating, or with a delayed update
 * before, so that the next step computes with the weights from before it. Waiting for the copies
 * ("published") and for the updates themselves are separate, which is what lets a delayed update
 * run beside the next step.
 */
final class HostUpdateQueue implements AutoCloseable {
  private final ExecutorService thread =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "host-optimizer");
            t.setDaemon(true);
            return t;
          });
  private final List<CompletableFuture<Void>> published = new ArrayList<>();
  private final List<CompletableFuture<Void>> updates = new ArrayList<>();
  private final AtomicLong updateNanos = new AtomicLong();
  private volatile long lastLanded; // host clock: the last gradient of the step reached the host
  private volatile long lastUpdated; // host clock: the last update of the step finished

  /**
   * Queues {@code update} of parameters [from, to) to run once {@code landed} has completed, and
   * {@code refreshCopies} after it, or before it when {@code late} (a delayed update); returns what
   * completes when both have run.
   */
  CompletableFuture<Void> submit(
      Event landed, int from, int to, HostUpdate update, boolean late, Runnable refreshCopies) {
    CompletableFuture<Void> copiesReady = new CompletableFuture<>();
    published.add(copiesReady);
    CompletableFuture<Void> done =
        CompletableFuture.runAsync(
            () -> {
              try {
                landed.synchronize();
                lastLanded = Math.max(lastLanded, System.nanoTime());
                long start = System.nanoTime();
                if (late) {
                  refreshCopies.run();
                  copiesReady.complete(null);
                }
                update.update(from, to);
                if (!late) {
                  refreshCopies.run();
                  copiesReady.complete(null);
                }
                lastUpdated = System.nanoTime();
                updateNanos.addAndGet(lastUpdated - start);
              } catch (RuntimeException | Error e) {
                copiesReady.completeExceptionally(e);
                throw e;
              }
            },
            thread);
    updates.add(done);
    return done;
  }

  /** Blocks until every queued layer's copies are refreshed (delayed updates may still run). */
  void awaitPublished() {
    await(published);
    updates.removeIf(CompletableFuture::isDone);
  }

  /** Blocks until every queued update is done; rethrows the first failure. */
  void awaitAll() {
    List<CompletableFuture<Void>> all = new ArrayList<>(published);
    all.addAll(updates);
    updates.clear();
    published.clear();
    await(all);
  }

  /**
   * Joins every future, not only up to the first failure: an update left running would write
   * weights that the caller, told of the failure, may free or save.
   */
  private static void await(List<CompletableFuture<Void>> futures) {
    CompletionException first = null;
    for (CompletableFuture<Void> future : futures) {
      try {
        future.join();
      } catch (CompletionException e) {
        first = first == null ? e : first;
      }
    }
    futures.clear();
    if (first != null) {
      throw new IllegalStateException(
          "host optimizer step failed: " + first.getCause(), first.getCause());
    }
  }

  /** Starts the timing of a new step's updates. */
  void resetTiming() {
    updateNanos.set(0);
    lastLanded = 0;
    lastUpdated = 0;
  }

  /** Milliseconds of update work since {@link #resetTiming}. */
  double updateMillis() {
    return updateNanos.get() / 1e6;
  }

  /** Milliseconds the updates ran on after the last gradient landed. */
  double tailMillis() {
    return Math.max(0, lastUpdated - lastLanded) / 1e6;
  }

  @Override
  public void close() {
    try {
      awaitAll();
    } finally {
      thread.shutdown(); // every task joined above: nothing runs on it now
    }
  }
}
