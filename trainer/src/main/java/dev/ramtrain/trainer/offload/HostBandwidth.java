package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * The host memory's streaming speed on the optimizer's threads: STREAM's triad over pinned slabs,
 * vectorized as the host AdamW is, so that an update's bytes per second can be read as a share of
 * what the machine streams.
 */
public final class HostBandwidth {
  private HostBandwidth() {}

  /**
   * Bytes per second of the best of {@code repeats} triads {@code a = b + 3 c} over {@code n}
   * floats each, on {@code threads}, counted as STREAM counts them (12 bytes an element; the
   * write's read-for-ownership, 4 more, uncounted).
   */
  public static double triad(Backend backend, HostThreads threads, int n, int repeats) {
    try (HostBuffer a = backend.allocateHost("bandwidth.a", 4L * n);
        HostBuffer b = backend.allocateHost("bandwidth.b", 4L * n);
        HostBuffer c = backend.allocateHost("bandwidth.c", 4L * n)) {
      MemoryUtil.setMemory(a.address(), a.bytes(), (byte) 0); // every page touched before timing
      MemoryUtil.setMemory(b.address(), b.bytes(), (byte) 1);
      MemoryUtil.setMemory(c.address(), c.bytes(), (byte) 2);
      double best = Double.MAX_VALUE;
      for (int it = 0; it < repeats + 1; it++) { // one warm-up
        long t0 = System.nanoTime();
        threads.forRange(
            0,
            n,
            (from, to) ->
                HostAdamWKernel.triad(
                    a.address() + 4L * from,
                    b.address() + 4L * from,
                    c.address() + 4L * from,
                    to - from));
        if (it > 0) {
          best = Math.min(best, (System.nanoTime() - t0) / 1e9);
        }
      }
      return 12.0 * n / best;
    }
  }
}
