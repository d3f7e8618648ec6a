package dev.ramtrain.trainer.dist;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.Parameters;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Averages a resident model's gradients over the ranks while its backward goes on, as PyTorch DDP
 * does with buckets: when a layer's backward is enqueued ({@link #layerDone}), an event marks it
 * and a communication thread copies that layer's gradient slice to pinned host memory on a stream
 * of its own once the event completes, all-reduces it over the ring and copies it back; {@link
 * #finish} makes the compute stream wait for every slice before clipping and the update. Every rank
 * exchanges the layers in the same order (backward's), so the ring's calls pair up.
 */
public final class GradientExchange implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(GradientExchange.class);

  /** A layer's slice of the gradient slab, in floats. */
  private record Slice(long offset, long count) {}

  private final Backend backend;
  private final DataParallel ranks;
  private final DeviceBuffer grads;
  private final HostBuffer host;
  private final Stream copies;
  private final List<Slice> slices = new ArrayList<>(); // by layer; count 0: no parameters
  private final List<Event> computed = new ArrayList<>(); // the layer's backward has run
  private final List<Event> returned = new ArrayList<>(); // its averaged slice is back
  private final ExecutorService thread;
  private final List<Future<?>> pending = new ArrayList<>();

  public GradientExchange(Backend backend, Model model, DataParallel ranks) {
    this.backend = backend;
    this.ranks = ranks;
    Parameters p = model.parameters();
    this.grads = p.grads();
    List<Parameters.Entry> entries = p.entries();
    int next = 0;
    for (Layer layer : model.layers()) {
      int n = layer.parameters().size();
      if (n == 0) {
        slices.add(new Slice(0, 0));
        continue;
      }
      Parameters.Entry first = entries.get(next);
      Parameters.Entry last = entries.get(next + n - 1);
      slices.add(new Slice(first.offset(), last.offset() + last.spec().count() - first.offset()));
      next += n;
    }
    this.host = backend.allocateHost("grad-exchange", grads.bytes());
    this.copies = backend.createStream("grad-exchange");
    for (int i = 0; i < slices.size(); i++) {
      computed.add(backend.createEvent("grads-computed." + i));
      returned.add(backend.createEvent("grads-averaged." + i));
    }
    this.thread =
        Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, "ramtrain-grad-exchange");
              t.setDaemon(true);
              return t;
            });
  }

  /** Layer {@code layer}'s backward is enqueued on {@code compute}: its gradient may go. */
  public void layerDone(Stream compute, int layer) {
    Slice s = slices.get(layer);
    if (s.count() == 0) {
      return;
    }
    Event ready = computed.get(layer);
    ready.record(compute);
    pending.add(thread.submit(() -> exchange(s, ready, returned.get(layer))));
  }

  private void exchange(Slice s, Event ready, Event back) {
    long bytes = 4 * s.count();
    long at = 4 * s.offset();
    DeviceBuffer slice = grads.view(s.offset(), s.count());
    copies.waitFor(ready);
    backend.copy(slice, host, at, bytes, copies);
    copies.synchronize();
    ranks.averageGradients(
        host.asByteBuffer().slice((int) at, (int) bytes).order(ByteOrder.nativeOrder()));
    backend.copy(host, at, slice, bytes, copies);
    back.record(copies);
  }

  /**
   * Waits for every slice's exchange and makes {@code compute} wait until the averaged gradients
   * are back; a failed exchange is rethrown here.
   */
  public void finish(Stream compute) {
    RuntimeException failure = null;
    for (Future<?> f : pending) {
      try {
        f.get();
      } catch (ExecutionException e) {
        if (failure == null) {
          failure =
              e.getCause() instanceof RuntimeException r
                  ? r
                  : new IllegalStateException("averaging gradients failed", e.getCause());
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        failure = new IllegalStateException("interrupted while averaging gradients", e);
      }
    }
    pending.clear();
    if (failure != null) {
      throw failure;
    }
    for (int i = 0; i < slices.size(); i++) {
      if (slices.get(i).count() > 0) {
        compute.waitFor(returned.get(i));
      }
    }
  }

  @Override
  public void close() {
    thread.shutdownNow();
    boolean stopped;
    try {
      stopped = thread.awaitTermination(30, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      stopped = false;
    }
    if (!stopped) {
      // An exchange still blocked on a peer would write into freed memory: keep it.
      LOG.warn("a gradient exchange did not stop within 30 s; its buffers are not freed");
      return;
    }
    try (host;
        copies) {
      computed.forEach(Event::close);
      returned.forEach(Event::close);
    }
  }
}
