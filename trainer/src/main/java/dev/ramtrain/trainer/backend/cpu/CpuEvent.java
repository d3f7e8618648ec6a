package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * A completion point: a future completed, with the time it was reached, by a marker task enqueued
 * on the recording stream.
 */
final class CpuEvent implements Event {
  private final Consumer<CpuEvent> onClose;
  private volatile CompletableFuture<Long> point = CompletableFuture.completedFuture(0L);

  /** {@code onClose} tells the backend's leak check that this event is gone. */
  CpuEvent(Consumer<CpuEvent> onClose) {
    this.onClose = onClose;
  }

  @Override
  public void record(Stream stream) {
    CompletableFuture<Long> next = new CompletableFuture<>();
    point = next;
    ((CpuStream) stream).enqueueMarker(() -> next.complete(System.nanoTime()));
  }

  /** The point recorded last, captured by a waiting stream when it enqueues its wait. */
  CompletableFuture<Long> point() {
    return point;
  }

  @Override
  public void synchronize() {
    point.join();
  }

  @Override
  public boolean isDone() {
    return point.isDone();
  }

  @Override
  public double millisSince(Event start) {
    CompletableFuture<Long> from = ((CpuEvent) start).point;
    if (!from.isDone() || !point.isDone()) {
      throw new IllegalStateException("millisSince needs two reached events");
    }
    return (point.join() - from.join()) / 1e6;
  }

  @Override
  public void close() {
    onClose.accept(this);
  }
}
