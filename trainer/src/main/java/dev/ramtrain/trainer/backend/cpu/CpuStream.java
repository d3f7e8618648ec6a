package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.threads.Uninterruptibly;
import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;

/**
 * A stream as a single-thread executor: work runs in enqueue order on its own thread, so work on
 * two streams overlaps and a missing wait shows up as a wrong result on CPU too. After a failure
 * the stream skips its remaining work (as a faulted CUDA context does) but still completes markers,
 * so events and synchronize never hang.
 */
final class CpuStream implements Stream {
  private final String label;
  private final ExecutorService executor;
  private final Runnable lastOnThread;
  private volatile Thread thread; // the executor's one thread, once it has started
  private volatile Throwable failure;

  /** {@code lastOnThread} runs on the stream's thread when it closes (OneDnn's release). */
  CpuStream(String label, Runnable lastOnThread) {
    this.label = label;
    this.lastOnThread = lastOnThread;
    this.executor =
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, "cpu-stream-" + label);
              t.setDaemon(true);
              thread = t;
              return t;
            });
  }

  @Override
  public String label() {
    return label;
  }

  /** Enqueues device work. */
  void enqueue(Runnable work) {
    executor.execute(
        () -> {
          if (failure != null) {
            return;
          }
          try {
            work.run();
          } catch (Throwable t) {
            failure = t;
          }
        });
  }

  /** Enqueues bookkeeping that runs even after a failure (event completion). */
  void enqueueMarker(Runnable marker) {
    executor.execute(marker);
  }

  @Override
  public void waitFor(Event event) {
    CompletableFuture<Long> point = ((CpuEvent) event).point(); // the point recorded by now
    enqueueMarker(point::join);
  }

  @Override
  public void synchronize() {
    CompletableFuture<Void> done = new CompletableFuture<>();
    enqueueMarker(() -> done.complete(null));
    done.join();
    checkFailures();
  }

  /**
   * Waits until the work enqueued so far has run, its failures left for {@link #synchronize}: what
   * freeing memory waits for, as cudaFree waits for the device. On the stream's own thread that
   * work has run already; a closed stream has run all of its work.
   */
  void drain() {
    if (Thread.currentThread() == thread) {
      return;
    }
    CompletableFuture<Void> passed = new CompletableFuture<>();
    try {
      executor.execute(() -> passed.complete(null));
    } catch (RejectedExecutionException closing) {
      Uninterruptibly.awaitTermination(executor, Duration.ofMinutes(1));
      return;
    }
    passed.join();
  }

  @Override
  public void checkFailures() {
    Throwable t = failure;
    if (t != null) {
      throw new BackendException("work on stream '" + label + "' failed: " + t.getMessage(), t);
    }
  }

  @Override
  public void close() {
    if (executor.isShutdown()) {
      return;
    }
    executor.execute(lastOnThread); // after the stream's work, even past a failure
    executor.shutdown();
    // The backend frees oneDNN's objects and the buffers next: work still running would use them.
    if (!Uninterruptibly.awaitTermination(executor, Duration.ofMinutes(1))) {
      throw new BackendException("stream '" + label + "' did not drain within a minute");
    }
  }
}
