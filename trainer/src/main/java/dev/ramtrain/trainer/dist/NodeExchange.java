package dev.ramtrain.trainer.dist;

import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.IntStream;

/**
 * The devices of one node, ranks in one JVM, exchanging gradients through host memory instead of
 * the ring: each of devices 1 to N - 1 hands a gradient it has on the host to device 0, which adds
 * them to its own in device order ({@code ((g0 + g1) + g2) ...}, the order one process accumulating
 * the devices' batches adds them), takes the node's sum over the ring to the other nodes, and hands
 * the mean back to the devices that want it (resident ones; an offloaded device's host copy is
 * device 0's, which updates for all). Calls pair up in order, as the ring's do; every wait is
 * bounded by the job's timeout and names the device it waited for.
 */
public final class NodeExchange {
  private static final long POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

  private final int devices;
  private final long timeoutNanos;
  private final List<BlockingQueue<Handed>> handed = new ArrayList<>();
  private volatile Throwable aborted; // a device of the node failed: every wait fails at once

  /** A gradient another device handed over, until device 0 is done with it. */
  record Handed(ByteBuffer floats, boolean wantsMean, CompletableFuture<Void> done) {}

  /**
   * The exchange of a node of {@code devices} (at least 1), waits given up after {@code timeout}.
   */
  public NodeExchange(int devices, Duration timeout) {
    if (devices < 1) {
      throw new IllegalArgumentException("a node has at least one device, got " + devices);
    }
    this.devices = devices;
    this.timeoutNanos = timeout.toNanos();
    for (int d = 1; d < devices; d++) {
      handed.add(new LinkedBlockingQueue<>());
    }
  }

  public int devices() {
    return devices;
  }

  /**
   * Device {@code device} (not 0): hands {@code floats} (position to limit) to device 0 and waits
   * until device 0 is done with it; {@code wantsMean}: it then holds the ranks' mean.
   */
  void handOver(int device, ByteBuffer floats, boolean wantsMean) {
    CompletableFuture<Void> done = new CompletableFuture<>();
    handed.get(device - 1).add(new Handed(floats, wantsMean, done));
    try {
      long deadline = System.nanoTime() + timeoutNanos;
      while (true) {
        requireNotAborted(device);
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new TimeoutException();
        }
        try {
          done.get(Math.min(left, POLL_NANOS), TimeUnit.NANOSECONDS);
          return;
        } catch (TimeoutException e) {
          // look again, for an abort or the deadline
        }
      }
    } catch (ExecutionException e) {
      throw failure(
          "device " + device + ": its node's device 0 failed: " + e.getCause().getMessage(),
          e.getCause());
    } catch (TimeoutException e) {
      throw failure(
          "device "
              + device
              + ": its node's device 0 took none of its gradients within "
              + seconds()
              + " s",
          null);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw failure("device " + device + ": interrupted", e);
    }
  }

  /**
   * Device 0: adds the other devices' next gradients to {@code sum} (its own, in place), device by
   * device; returns them, to be {@link #handBack handed back}.
   */
  List<Handed> addOthers(ByteBuffer sum) {
    FloatBuffer total = sum.slice().order(ByteOrder.nativeOrder()).asFloatBuffer();
    List<Handed> taken = new ArrayList<>();
    try {
      List<FloatBuffer> others = new ArrayList<>();
      for (int d = 1; d < devices; d++) {
        Handed theirs = take(d);
        taken.add(theirs);
        if (theirs.floats().remaining() != sum.remaining()) {
          throw new IllegalStateException(
              "device "
                  + d
                  + " handed "
                  + theirs.floats().remaining() / 4
                  + " gradients, device 0 has "
                  + sum.remaining() / 4
                  + ": the node's devices do not run the same model");
        }
        others.add(theirs.floats().slice().order(ByteOrder.nativeOrder()).asFloatBuffer());
      }
      addInOrder(total, others);
      return taken;
    } catch (RuntimeException e) {
      fail(taken, e);
      throw e;
    }
  }

  private static final int CHUNK = 1 << 16;

  /**
   * {@code total += g1; total += g2; ...}, element by element in that order (the bits one thread
   * adding them gives), in chunks spread over the host's cores: on an 8-GPU node the other devices'
   * gradients are 7 passes over the model.
   */
  static void addInOrder(FloatBuffer total, List<FloatBuffer> others) {
    int n = total.limit();
    IntStream.range(0, (n + CHUNK - 1) / CHUNK)
        .parallel()
        .forEach(
            c -> {
              int from = c * CHUNK;
              int to = Math.min(n, from + CHUNK);
              for (FloatBuffer g : others) {
                for (int i = from; i < to; i++) {
                  total.put(i, total.get(i) + g.get(i));
                }
              }
            });
  }

  /**
   * Bytes a second device 0 adds another device's gradient at, on the host's cores (the best of
   * three sums over {@code n} floats, 12 bytes an element: two read, one written), for the plan of
   * a node.
   */
  public static double addBytesPerSecond(int n) {
    FloatBuffer total =
        ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder()).asFloatBuffer();
    FloatBuffer g = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder()).asFloatBuffer();
    double best = Double.MAX_VALUE;
    for (int round = 0; round < 4; round++) { // the first warms the loop up
      long t0 = System.nanoTime();
      addInOrder(total, List.of(g));
      if (round > 0) {
        best = Math.min(best, (System.nanoTime() - t0) / 1e9);
      }
    }
    return 12.0 * n / best;
  }

  /** Device 0: {@code mean} to every device of {@code taken} that wants it; all are done. */
  void handBack(List<Handed> taken, ByteBuffer mean) {
    for (Handed theirs : taken) {
      if (theirs.wantsMean()) {
        theirs.floats().slice().put(mean.slice());
      }
      theirs.done().complete(null);
    }
  }

  /** Device 0 could not finish the exchange: the devices of {@code taken} fail with it. */
  void fail(List<Handed> taken, Throwable cause) {
    for (Handed theirs : taken) {
      theirs.done().completeExceptionally(cause);
    }
  }

  private Handed take(int device) {
    try {
      long deadline = System.nanoTime() + timeoutNanos;
      Handed theirs = null;
      while (theirs == null && System.nanoTime() < deadline) {
        requireNotAborted(0);
        theirs =
            handed
                .get(device - 1)
                .poll(Math.min(POLL_NANOS, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      }
      if (theirs == null) {
        throw failure(
            "device 0: its node's device "
                + device
                + " handed no gradient within "
                + seconds()
                + " s",
            null);
      }
      return theirs;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw failure("device 0: interrupted", e);
    }
  }

  /**
   * A device of the node failed ({@code cause}): every wait of the others fails at once, naming it,
   * instead of at the timeout.
   */
  public void abort(Throwable cause) {
    aborted = cause;
  }

  private void requireNotAborted(int device) {
    Throwable cause = aborted;
    if (cause != null) {
      throw new NodeStoppedException(
          "device " + device + ": another device of its node stopped: " + cause.getMessage(),
          cause);
    }
  }

  /** Unchecked, as {@link DataParallel}'s collectives fail: it ends the training step. */
  private static UncheckedIOException failure(String message, Throwable cause) {
    return new UncheckedIOException(message, new CollectiveException(message, cause));
  }

  private long seconds() {
    return Duration.ofNanos(timeoutNanos).toSeconds();
  }
}
