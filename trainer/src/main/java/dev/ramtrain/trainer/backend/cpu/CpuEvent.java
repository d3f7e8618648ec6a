package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;
import java.util.concurrent.CompletableFuture;

/** A completion point: a future completed by a marker task enqueued on the recording stream. */
final class CpuEvent implements Event {
  private volatile CompletableFuture<Void> point = CompletableFuture.completedFuture(null);

  @Override
  public void record(Stream stream) {
    CompletableFuture<Void> next = new CompletableFuture<>();
    point = next;
    ((CpuStream) stream).enqueueMarker(() -> next.complete(null));
  }

  /** The point recorded last, captured by a waiting stream when it enqueues its wait. */
  CompletableFuture<Void> point() {
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
  public void close() {}
}
