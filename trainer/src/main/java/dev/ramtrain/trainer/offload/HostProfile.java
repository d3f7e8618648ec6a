package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;

/**
 * What the plan needs to know of the host: how fast its memory streams on the optimizer's threads
 * ({@link HostBandwidth}'s triad). The host update and the copies to and from the device read and
 * write the same memory, so this one rate is what they share.
 */
public record HostProfile(String name, double bandwidthBytesPerSecond) {
  /** A host whose bandwidth the plan does not know: it then counts no sharing. */
  public static final HostProfile UNMEASURED =
      new HostProfile("unmeasured", Double.POSITIVE_INFINITY);

  /** Floats in each of the triad's three arrays: 192 MiB in all, past the caches a core reaches. */
  private static final int TRIAD_FLOATS = 1 << 24;

  public HostProfile {
    if (!(bandwidthBytesPerSecond > 0)) {
      throw new IllegalArgumentException(
          "host profile "
              + name
              + ": the bandwidth must be positive, got "
              + bandwidthBytesPerSecond);
    }
  }

  /** This host as {@code threads} optimizer threads stream it: the best of two triads. */
  public static HostProfile measure(Backend backend, int threads) {
    return measure(backend, threads, Long.MAX_VALUE);
  }

  /**
   * As above, the triad's three arrays within {@code bytesAtMost} (a run's pinned host memory,
   * allocated after it: the measurement never raises the run's peak, and a host update over fewer
   * bytes streams them from closer caches, as the triad then does).
   */
  public static HostProfile measure(Backend backend, int threads, long bytesAtMost) {
    int floats = (int) Math.max(1 << 10, Math.min(TRIAD_FLOATS, bytesAtMost / 12));
    try (HostThreads pool = new HostThreads(threads)) {
      return new HostProfile(
          String.format("measured (%d thread%s)", threads, threads == 1 ? "" : "s"),
          HostBandwidth.triad(backend, pool, floats, 2));
    }
  }

  /** Whether the bandwidth is known (sharing is then counted). */
  public boolean measured() {
    return Double.isFinite(bandwidthBytesPerSecond);
  }
}
