package dev.ramtrain.trainer.backend.cpu;

import java.util.SplittableRandom;
import java.util.concurrent.locks.LockSupport;

/**
 * Time the CPU backend's host-device copies wait before their memcpy: bytes over a bandwidth (a
 * PCIe link's), plus a random delay up to {@code maxJitterNanos} drawn from {@code seed}. The copy
 * stream idles, so the cores stay free for compute as they would beside a real bus, and the data
 * lands late, so a missing wait reads stale or unfinished values.
 */
public final class SimulatedBus {
  /** Copies take only their memcpy. */
  public static final SimulatedBus NONE = new SimulatedBus(0, 0, 0);

  private final double bytesPerSecond;
  private final long maxJitterNanos;
  private final SplittableRandom random;

  /** {@code bytesPerSecond} 0 adds no transfer time; {@code maxJitterNanos} 0 no jitter. */
  public SimulatedBus(double bytesPerSecond, long maxJitterNanos, long seed) {
    if (bytesPerSecond < 0 || maxJitterNanos < 0) {
      throw new IllegalArgumentException("bandwidth and jitter must be >= 0");
    }
    this.bytesPerSecond = bytesPerSecond;
    this.maxJitterNanos = maxJitterNanos;
    this.random = new SplittableRandom(seed);
  }

  /** The delay of one copy of {@code bytes}; drawn when the copy is enqueued. */
  synchronized long nanosFor(long bytes) {
    long transfer = bytesPerSecond > 0 ? (long) (bytes / bytesPerSecond * 1e9) : 0;
    return transfer + (maxJitterNanos > 0 ? random.nextLong(maxJitterNanos + 1) : 0);
  }

  /** Parks for {@code nanos}. */
  static void idle(long nanos) {
    long deadline = System.nanoTime() + nanos;
    for (long left = nanos; left > 0; left = deadline - System.nanoTime()) {
      LockSupport.parkNanos(left);
    }
  }
}
