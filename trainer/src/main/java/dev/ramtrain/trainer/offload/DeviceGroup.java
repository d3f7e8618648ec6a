package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.dist.NodeStoppedException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
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
  private static final long POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

  private final int devices;
  private final long timeoutNanos;
  private final CompletableFuture<Shared> first = new CompletableFuture<>();
  private final Object monitor = new Object();
  private long published = -1; // the steps whose updates device 0 has published; guarded
  private int reading; // the other devices built over device 0's slabs and not closed; guarded
  private int closed; // the other devices that closed (or never built); guarded
  private Throwable aborted; // a device of the node failed: every wait fails at once; guarded
  private long swaps; // times device 0 swapped the weights' average and the masters; guarded
  private int doneWithAverage; // other devices done computing with the swapped-in average; guarded

  /** What device 0 shares: its slabs (the others read them) and its optimizer (checkpoints). */
  record Shared(HostSlabs slabs, HostOptimizer optimizer) {}

  /** A group of {@code devices} (at least 1) whose waits give up after {@code timeout}. */
  public DeviceGroup(int devices, Duration timeout) {
    if (devices < 1) {
      throw new IllegalArgumentException("a node has at least one device, got " + devices);
    }
    this.devices = devices;
    this.timeoutNanos = timeout.toNanos();
  }

  public int devices() {
    return devices;
  }

  /**
   * A device of the node failed ({@code cause}): the others' waits fail at once, naming it, and
   * device 0 frees its slabs once the devices reading them have closed.
   */
  public void abort(Throwable cause) {
    synchronized (monitor) {
      aborted = cause;
      monitor.notifyAll();
    }
    first.completeExceptionally(cause);
  }

  /** Device 0, once its learner is built: the others build theirs over its slabs. */
  void shareFirst(HostSlabs slabs, HostOptimizer optimizer) {
    first.complete(new Shared(slabs, optimizer));
  }

  /** Device 0 could not build its learner: the others fail with {@code cause}. */
  void firstFailed(Throwable cause) {
    first.completeExceptionally(cause);
  }

  /**
   * What device 0 shares, waiting for it to be built; the caller then reads device 0's slabs until
   * it says {@link #closed}.
   */
  Shared awaitFirst(int device) {
    long deadline = System.nanoTime() + timeoutNanos;
    try {
      while (true) {
        try {
          Shared shared =
              first.get(Math.min(POLL_NANOS, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
          synchronized (monitor) {
            reading++;
          }
          return shared;
        } catch (TimeoutException e) {
          if (System.nanoTime() >= deadline) {
            throw new IllegalStateException(
                "device "
                    + device
                    + ": the node's device 0 built no model within "
                    + seconds()
                    + " s");
          }
        }
      }
    } catch (ExecutionException e) {
      throw new NodeStoppedException(
          "device " + device + ": the node's device 0 has no model: " + e.getCause().getMessage(),
          e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("device " + device + ": interrupted", e);
    }
  }

  /** Device 0: the updates of its first {@code steps} steps are done and their copies written. */
  void publish(long steps) {
    synchronized (monitor) {
      published = Math.max(published, steps);
      monitor.notifyAll();
    }
  }

  /**
   * Another device, before a forward: waits until device 0 has published the updates of the first
   * {@code steps} steps; returns how many it has published.
   */
  long awaitPublished(int device, long steps) {
    synchronized (monitor) {
      await(
          device,
          () -> published >= steps,
          "the node's device 0 published no update of step " + steps);
      return published;
    }
  }

  /**
   * Device 0, with {@code --ema}: it swapped the weights' average and the masters (in, or back),
   * and their copies are written; the other devices' count of those done since they last computed
   * with the average starts again.
   */
  void swapped() {
    synchronized (monitor) {
      swaps++;
      doneWithAverage = 0;
      monitor.notifyAll();
    }
  }

  /** Another device: waits until device 0 has swapped {@code times} times in all. */
  void awaitSwaps(int device, long times) {
    synchronized (monitor) {
      await(device, () -> swaps >= times, "the node's device 0 did not swap the weights' average");
    }
  }

  /** Another device is done computing with the swapped-in average (device 0 may swap it back). */
  void doneWithAverage() {
    synchronized (monitor) {
      doneWithAverage++;
      monitor.notifyAll();
    }
  }

  /** Device 0: waits until every other device is done with the swapped-in average. */
  void awaitOthersDoneWithAverage() {
    synchronized (monitor) {
      await(
          0,
          () -> doneWithAverage >= devices - 1,
          "the node's other devices were not done with the weights' average");
    }
  }

  /**
   * Waits, holding the monitor, until {@code condition} holds, failing at once when a device of the
   * node has stopped and after the job's timeout naming {@code device} and what did not happen.
   */
  private void await(int device, java.util.function.BooleanSupplier condition, String what) {
    long deadline = System.nanoTime() + timeoutNanos;
    while (!condition.getAsBoolean()) {
      if (aborted != null) {
        throw new NodeStoppedException(
            "device " + device + ": another device of its node stopped: " + aborted.getMessage(),
            aborted);
      }
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        throw new IllegalStateException(
            "device " + device + ": " + what + " within " + seconds() + " s");
      }
      try {
        TimeUnit.NANOSECONDS.timedWait(monitor, left);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("device " + device + ": interrupted", e);
      }
    }
  }

  /** Another device has closed its learner (built over device 0's slabs or not). */
  void closed(boolean wasReading) {
    synchronized (monitor) {
      closed++;
      if (wasReading) {
        reading--;
      }
      monitor.notifyAll();
    }
  }

  /**
   * Device 0, closing: waits (bounded) until the other devices no longer read its slabs (all have
   * closed; after an abort, those that were reading); false if one still might, and the slabs must
   * then stay allocated.
   */
  boolean awaitOthersClosed() {
    long deadline = System.nanoTime() + timeoutNanos;
    synchronized (monitor) {
      while (aborted == null ? closed < devices - 1 : reading > 0) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        try {
          TimeUnit.NANOSECONDS.timedWait(monitor, left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return false;
        }
      }
      return true;
    }
  }

  private long seconds() {
    return Duration.ofNanos(timeoutNanos).toSeconds();
  }
}
