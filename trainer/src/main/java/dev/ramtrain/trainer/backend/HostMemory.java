package dev.ramtrain.trainer.backend;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;

/** How much memory the host can still give, for planning pinned allocations before making them. */
public final class HostMemory {
  private HostMemory() {}

  /**
   * Linux's MemAvailable (MemFree leaves out reclaimable page cache, which would make an idle
   * machine look full), capped by the JVM's view of total memory (a container's limit); elsewhere
   * the JVM's free memory.
   */
  public static long availableBytes() {
    var os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    try {
      for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
        if (line.startsWith("MemAvailable:")) {
          long kib = Long.parseLong(line.replaceAll("[^0-9]", ""));
          return Math.min(kib * 1024, os.getTotalMemorySize());
        }
      }
    } catch (IOException | NumberFormatException e) {
      // not Linux, or an unusual /proc: fall through
    }
    return os.getFreeMemorySize();
  }

  /** The machine's memory as the JVM sees it (a container's limit where there is one). */
  public static long totalBytes() {
    var os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    return os.getTotalMemorySize();
  }
}
