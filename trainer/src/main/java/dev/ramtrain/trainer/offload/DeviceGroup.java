package dev.ramtrain.trainer.offload;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The devices of one node training in one JVM over one host copy of the model (RamTorch's shared
 * CPU copy): device 0's offloaded learner owns the pinned masters, bf16 copies and optimizer state;
 * every device streams its layers from them, and the other devices land each layer's gradient in
 * two slots of their own, from where device 0's host optimizer thread adds them to its own in
 * device order ({@code ((g0 + g1) + g2) ...}, the order one process accumulating the devices'
 * batches adds them) before the node's sum goes on to the other nodes and the update. A device's
 * next forward waits until device 0 has published the step's update.
 *
 * <p>One group per node and job, made by whoever starts the node's ranks and handed to each; every
 * wait is bounded by the job's timeout and names the device it waited for.
 */
public final class DeviceGroup {
  private final int devices;
  private final long timeoutNanos;
  private final CompletableFuture<Shared> first = new CompletableFuture<>();
  private final List<BlockingQueue<Landing>> landings = new ArrayList<>();
  private final CountDownLatch othersClosed;
  private final Object publication = new Object();
  private long published = -1; // the steps whose updates device 0 has published; guarded

  /** What device 0 shares: its slabs (the others read them) and its optimizer (checkpoints). */
  record Shared(HostSlabs slabs, HostOptimizer optimizer) {}

  /**
   * A layer's gradient another device landed, [from, from + count), until device 0 has added it.
   */
  private record Landing(int from, ByteBuffer floats, CompletableFuture<Void> added) {}

  /** A group of {@code devices} (at least 1) whose waits give up after {@code timeout}. */
  public DeviceGroup(int devices, Duration timeout) {
    if (devices < 1) {
      throw new IllegalArgumentException("a node has at least one device, got " + devices);
    }
    this.devices = devices;
    this.timeoutNanos = timeout.toNanos();
    for (int d = 1; d < devices; d++) {
      landings.add(new LinkedBlockingQueue<>());
    }
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

  /**
   * Device {@code device} (not 0), on its host thread: hands the gradient of parameters [from, from
   * + floats.remaining() / 4) it landed to device 0 and waits until device 0 has added it (the slot
   * is then free again).
   */
  void land(int device, int from, ByteBuffer floats) {
    CompletableFuture<Void> added = new CompletableFuture<>();
    landings.get(device - 1).add(new Landing(from, floats, added));
    try {
      added.get(timeoutNanos, TimeUnit.NANOSECONDS);
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause().getMessage(), e.getCause());
    } catch (TimeoutException e) {
      throw new IllegalStateException(
          "device "
              + device
              + ": the node's device 0 took none of its gradients within "
              + timeoutText());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("device " + device + ": interrupted", e);
    }
  }

  /**
   * Device 0, on its host optimizer thread: adds every other device's gradient of the layer whose
   * parameters start at {@code from} to {@code sum} (device 0's own, in place), device by device.
   */
  void addOthers(int from, ByteBuffer sum) {
    FloatBuffer total = sum.slice().order(ByteOrder.nativeOrder()).asFloatBuffer();
    for (int d = 1; d < devices; d++) {
      Landing landed = take(d);
      if (landed.from() != from || landed.floats().remaining() != sum.remaining()) {
        IllegalStateException wrong =
            new IllegalStateException(
                "device "
                    + d
                    + " landed the gradient of parameters from "
                    + landed.from()
                    + ", device 0 sums those from "
                    + from
                    + ": the node's devices do not run the same model");
        landed.added().completeExceptionally(wrong);
        throw wrong;
      }
      FloatBuffer theirs = landed.floats().slice().order(ByteOrder.nativeOrder()).asFloatBuffer();
      for (int i = 0; i < total.limit(); i++) {
        total.put(i, total.get(i) + theirs.get(i));
      }
      landed.added().complete(null);
    }
  }

  private Landing take(int device) {
    try {
      Landing landed = landings.get(device - 1).poll(timeoutNanos, TimeUnit.NANOSECONDS);
      if (landed == null) {
        throw new IllegalStateException(
            "device 0: the node's device "
                + device
                + " landed no gradient within "
                + timeoutText());
      }
      return landed;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("device 0: interrupted", e);
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
