package dev.ramtrain.trainer.dist;

import dev.ramtrain.threads.Uninterruptibly;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.Parameters;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Averages a resident model's gradients over the ranks while its backward goes on, as PyTorch DDP
 * does: layers are grouped, in backward's order, into buckets of at least {@link #BUCKET_BYTES} of
 * gradients (DDP's default bucket size); when a bucket's last layer's backward is enqueued ({@link
 * #layerDone}), an event marks it and a communication thread copies the bucket's slice of the slab
 * to pinned host memory on a stream of its own once the event completes, all-reduces it over the
 * ring and copies it back; {@link #finish} makes the compute stream wait for every bucket before
 * clipping and the update. Every rank exchanges the buckets in the same order, so the ring's calls
 * pair up. A model of one bucket exchanges its gradients once after backward, on the calling
 * thread: handing one exchange to another thread hides nothing and measured 5-14% slower on two
 * cores (per-layer exchanges of a 7 MB model, 12% slower), the reason for buckets.
 *
 * <p>Under ZeRO the gradients are reduced to their owners instead, and nothing comes back to the
 * device: each rank's share of the mean is left in the host slab ({@link #reduced}), where the
 * share's update takes it. ZeRO-2 reduces each bucket as it closes ({@link
 * DataParallel#reduceToOwnersMean}, the reduce-scatter's chunks cut to the bucket), ZeRO-1 the
 * whole slab after backward; the bits are the same.
 */
public final class GradientExchange implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(GradientExchange.class);

  /** Gradient bytes per exchange at least (PyTorch DDP's bucket_cap_mb default). */
  public static final long BUCKET_BYTES = 25L << 20;

  /** A bucket's slice of the gradient slab, in floats. */
  private record Slice(long offset, long count) {}

  private final Backend backend;
  private final DataParallel ranks;
  private final DeviceBuffer grads;
  private final HostBuffer host;
  // By layer: the bucket a layer closes (the last of it backward reaches), else null.
  private final List<Slice> closes = new ArrayList<>();
  private final boolean overlapped; // more than one bucket, and not ZeRO-1
  private final boolean toOwners; // ZeRO: reduced to the shares' owners, left on the host
  // Only when overlapped, by layer where a bucket closes (else null): the bucket's backward has
  // run, its averaged slice is back; the stream and thread that exchange it.
  private final List<Event> computed = new ArrayList<>();
  private final List<Event> returned = new ArrayList<>();
  private final Stream copies;
  private final ExecutorService thread;
  private final List<Future<?>> pending = new ArrayList<>();

  public GradientExchange(Backend backend, Model model, DataParallel ranks) {
    this(backend, model, ranks, BUCKET_BYTES);
  }

  /** With buckets of at least {@code bucketBytes} (tests use small ones). */
  GradientExchange(Backend backend, Model model, DataParallel ranks, long bucketBytes) {
    this.backend = backend;
    this.ranks = ranks;
    Parameters p = model.parameters();
    this.grads = p.grads();
    // Each layer's slice of the slab (layers' parameters lie in layer order), then buckets of
    // consecutive layers from the last one down, each closed by its lowest layer.
    List<Slice> layers = new ArrayList<>();
    List<Parameters.Entry> entries = p.entries();
    int next = 0;
    for (Layer layer : model.layers()) {
      int n = layer.parameters().size();
      if (n == 0) {
        layers.add(null);
        continue;
      }
      Parameters.Entry first = entries.get(next);
      Parameters.Entry last = entries.get(next + n - 1);
      layers.add(new Slice(first.offset(), last.offset() + last.spec().count() - first.offset()));
      next += n;
    }
    int lowest = 0; // the first layer with parameters
    while (lowest < layers.size() - 1 && layers.get(lowest) == null) {
      lowest++;
    }
    long end = -1; // the open bucket's end (floats), -1: none open
    int buckets = 0;
    closes.addAll(java.util.Collections.nCopies(layers.size(), (Slice) null));
    for (int i = layers.size() - 1; i >= 0; i--) {
      Slice s = layers.get(i);
      if (s == null) {
        continue;
      }
      end = end < 0 ? s.offset() + s.count() : end;
      if (4 * (end - s.offset()) >= bucketBytes || i == lowest) {
        buckets++;
        closes.set(i, new Slice(s.offset(), end - s.offset()));
        end = -1;
      }
    }
    this.toOwners = ranks.partitionsOptimizerState();
    // ZeRO-1 reduces once after backward; ZeRO-2 as each bucket closes.
    this.overlapped = buckets > 1 && (!toOwners || ranks.partitionsGradients());
    this.host = backend.allocateHost("grad-exchange", grads.bytes());
    for (int i = 0; i < closes.size(); i++) {
      boolean exchanges = overlapped && closes.get(i) != null;
      computed.add(exchanges ? backend.createEvent("grads-computed." + i) : null);
      returned.add(exchanges ? backend.createEvent("grads-averaged." + i) : null);
    }
    this.copies = overlapped ? backend.createStream("grad-exchange") : null;
    this.thread =
        overlapped
            ? Executors.newSingleThreadExecutor(
                r -> {
                  Thread t = new Thread(r, "ramtrain-grad-exchange");
                  t.setDaemon(true);
                  return t;
                })
            : null;
  }

  /** Layer {@code layer}'s backward is enqueued on {@code compute}: the bucket it closes may go. */
  public void layerDone(Stream compute, int layer) {
    Slice s = closes.get(layer);
    if (s == null || !overlapped) {
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
    ByteBuffer bucket = host.range(at, bytes);
    if (toOwners) {
      ranks.reduceToOwnersMean(bucket, s.offset(), grads.count());
    } else {
      ranks.averageGradients(bucket);
      backend.copy(host, at, slice, bytes, copies);
    }
    back.record(copies);
  }

  /**
   * Waits for every slice's exchange and makes {@code compute} wait until the averaged gradients
   * are back; a failed exchange is rethrown here.
   */
  public void finish(Stream compute) {
    if (!overlapped) {
      long bytes = grads.bytes();
      backend.copy(grads, host, 0, bytes, compute);
      compute.synchronize();
      if (toOwners) { // a slab over 2 GiB in parts, each of them one Java buffer's view
        ranks.reduceScatterMean(
            host, DataParallel.pieces(grads.count(), HostBuffer.FLOATS_PER_COPY));
      } else {
        ranks.averageGradients(host.asByteBuffer().order(ByteOrder.nativeOrder()));
        backend.copy(host, 0, grads, bytes, compute);
      }
      return;
    }
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
    for (int i = 0; i < closes.size(); i++) {
      if (closes.get(i) != null) {
        compute.waitFor(returned.get(i));
      }
    }
  }

  /**
   * ZeRO, after {@link #finish}: the host slab, float32 in the slab's order, whose elements in this
   * rank's {@link DataParallel#share} are their mean over the ranks (the rest partly summed). Free
   * for the share's update to use until the next backward's first exchange.
   */
  public HostBuffer reduced() {
    if (!toOwners) {
      throw new IllegalStateException("the gradients are averaged back to the device, not reduced");
    }
    return host;
  }

  @Override
  public void close() {
    boolean stopped = true;
    if (thread != null) {
      thread.shutdownNow();
      stopped = Uninterruptibly.awaitTermination(thread, Duration.ofSeconds(30));
    }
    if (!stopped) {
      // An exchange still blocked on a peer would write into freed memory: keep it.
      LOG.warn("a gradient exchange did not stop within 30 s; its buffers are not freed");
      return;
    }
    try (host;
        copies) {
      computed.stream().filter(java.util.Objects::nonNull).forEach(Event::close);
      returned.stream().filter(java.util.Objects::nonNull).forEach(Event::close);
    }
  }
}
