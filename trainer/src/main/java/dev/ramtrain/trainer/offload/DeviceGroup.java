package dev.ramtrain.trainer.offload;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The devices of one node training in one JVM over one host copy of the model (RamTorch's shared
 * CPU copy): device 0's offloaded learner owns the pinned masters, bf16 copies and optimizer state;
 * every device streams its layers from them, and the other devices land each layer's gradient in
 * two slots of their own, from where they hand it to device 0's host optimizer thread ({@code
 * dist.NodeExchange}), which adds them to its own before the node's sum goes on to the other nodes
 * and the update. A device's next forward waits until device 0 has published the step's update.
 *
 * <p>One group per node and job, made by whoever starts the node's ranks and handed to each; every
 * wait is bounded by the job's timeout and names the device it waited for.
 */
public final class DeviceGroup {
  private final int devices;
  private final long timeoutNanos;
  private final CompletableFuture<Shared> first = new CompletableFuture<>();
  private final CountDownLatch othersClosed;
  private final Object publication = new Object();
  private long published = -1; // the steps whose updates device 0 has published; guarded

  /** What device 0 shares: its slabs (the others read them) and its optimizer (checkpoints). */
  record Shared(HostSlabs slabs, HostOptimizer optimizer) {}

  /** A group of {@code devices} (at least 1) whose waits give up after {@code timeout}. */
  public DeviceGroup(int devices, Duration timeout) {
    if (devices < 1) {
      throw new IllegalArgumentException("a node has at least one device, got " + devices);
    }
    this.devices = devices;
    this.timeoutNanos = timeout.toNanos();
    this.othersClosed = new CountDownLatch(devices - 1);
  }

  public int devices() {
    return devices;
  }

  /** Device 0, once its learner is built: the others build theirs over its slabs. */
  void shareFirst(HostSlabs slabs, HostOptimizer optimizer) {
    first.complete(new Shared(slabs, optimizer));
  }

  /** Device 0 could not build its learner: the others fail with {@code cause}. */
  void firstFailed(Throwable cause) {
    first.completeExceptionally(cause);
  }

  /** What device 0 shares, waiting for it to be built. */
  Shared awaitFirst(int device) {
    try {
      return first.get(timeoutNanos, TimeUnit.NANOSECONDS);
    } catch (ExecutionException e) {
      throw new IllegalStateException(
          "device " + device + ": the node's device 0 failed to build its model: " + e.getCause(),
          e.getCause());
    } catch (TimeoutException e) {
      throw new IllegalStateException(
          "device " + device + ": the node's device 0 built no model within " + timeoutText());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("device " + device + ": interrupted", e);
    }
  }

  /** Device 0: the updates of its first {@code steps} steps are done and their copies written. */
  void publish(long steps) {
    synchronized (publication) {
      published = Math.max(published, steps);
      publication.notifyAll();
    }
  }

  /**
   * Another device, before a forward: waits until device 0 has published the updates of the first
   * {@code steps} steps; returns how many it has published.
   */
  long awaitPublished(int device, long steps) {
    long deadline = System.nanoTime() + timeoutNanos;
    synchronized (publication) {
      while (published < steps) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new IllegalStateException(
              "device "
                  + device
                  + ": the node's device 0 published no update of step "
                  + steps
                  + " within "
                  + timeoutText());
        }
        try {
          TimeUnit.NANOSECONDS.timedWait(publication, left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("device " + device + ": interrupted", e);
        }
      }
      return published;
    }
  }

  /** Another device has closed its learner: device 0 may free the slabs once all have. */
  void closed() {
    othersClosed.countDown();
  }

  /**
   * Device 0, closing: waits (bounded) until the other devices no longer read its slabs; false if
   * one still might, and the slabs must then stay allocated.
   */
  boolean awaitOthersClosed() {
    try {
      return othersClosed.await(timeoutNanos, TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  private String timeoutText() {
    return Duration.ofNanos(timeoutNanos).toSeconds() + " s";
  }
}
