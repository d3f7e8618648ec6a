package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.ByteSize;
import dev.ramtrain.trainer.backend.HostMemory;

/**
 * How much memory the cpu backend's "device" may take ({@code ramtrain.cpu.memory}): the one number
 * its placement plans with and its allocator enforces. By default what the host has available at
 * start, less what the JVM's heap may still grow to and a tenth of the machine for the page cache
 * (the memory-mapped shards), so that a plan that fits leaves the heap and the data their share.
 *
 * @param bytes the limit
 * @param source how it was set, for the startup line and errors
 */
public record CpuMemoryLimit(long bytes, String source) {
  /** The page cache's share of the machine in the default limit. */
  static final int PAGE_CACHE_DIVISOR = 10;

  public CpuMemoryLimit {
    if (bytes < 0) {
      throw new IllegalArgumentException("ramtrain.cpu.memory: negative, " + bytes + " bytes");
    }
  }

  /** {@code asked} bytes, or, for 0, the default from this host and JVM now. */
  public static CpuMemoryLimit of(long asked) {
    if (asked > 0) {
      return new CpuMemoryLimit(asked, "ramtrain.cpu.memory=" + ByteSize.of(asked));
    }
    Runtime jvm = Runtime.getRuntime();
    return auto(
        HostMemory.availableBytes(), jvm.maxMemory() - jvm.totalMemory(), HostMemory.totalBytes());
  }

  /** The default from the host's {@code available} bytes, the heap's room to grow, its total. */
  static CpuMemoryLimit auto(long available, long heapToGrow, long total) {
    long pageCache = total / PAGE_CACHE_DIVISOR;
    long bytes = Math.max(0, available - heapToGrow - pageCache);
    return new CpuMemoryLimit(
        bytes,
        String.format(
            "ramtrain.cpu.memory=auto: %s available, less %s the JVM's heap may still take (-Xmx)"
                + " and %s for the page cache",
            ByteSize.of(available), ByteSize.of(heapToGrow), ByteSize.of(pageCache)));
  }
}
