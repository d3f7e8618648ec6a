package dev.ramtrain.trainer.backend;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.StringJoiner;

/**
 * A backend's account of one kind of memory: what is live (by label, for leak reports), how many
 * bytes are allocated now and at most, and how many allocations were ever made. Every backend keeps
 * one for device memory and one for host memory, so leak reports read the same on all of them.
 */
public final class MemoryLedger {
  private final Map<Object, String> live = new LinkedHashMap<>();
  private long allocated;
  private long peak;
  private long count;

  /**
   * Records {@code allocation} (any object identifying it) of {@code bytes} under {@code label}.
   */
  public synchronized void opened(Object allocation, String label, long bytes) {
    live.put(allocation, label + " (" + bytes + " bytes)");
    allocated += bytes;
    peak = Math.max(peak, allocated);
    count++;
  }

  /** Records that {@code allocation} of {@code bytes} was freed. */
  public synchronized void closed(Object allocation, long bytes) {
    if (live.remove(allocation) != null) {
      allocated -= bytes;
    }
  }

  public synchronized long allocated() {
    return allocated;
  }

  public synchronized long peak() {
    return peak;
  }

  public synchronized void resetPeak() {
    peak = allocated;
  }

  /** Allocations made so far, freed or not. */
  public synchronized long count() {
    return count;
  }

  /**
   * Throws naming everything {@code backend} still has open at its close: device and host
   * allocations and events (by label).
   */
  public static void requireNothingOpen(
      String backend, MemoryLedger device, MemoryLedger host, Collection<String> openEvents) {
    StringJoiner leaks = new StringJoiner("; ");
    if (device.leaks() != null) {
      leaks.add("device " + device.leaks());
    }
    if (host.leaks() != null) {
      leaks.add("host " + host.leaks());
    }
    if (!openEvents.isEmpty()) {
      leaks.add(openEvents.size() + " open event(s): " + String.join(", ", openEvents));
    }
    if (leaks.length() > 0) {
      throw new IllegalStateException(
          backend + " backend closed with resources still open: " + leaks);
    }
  }

  /** Null when nothing is live, else the leaked allocations by label. */
  public synchronized String leaks() {
    if (live.isEmpty()) {
      return null;
    }
    StringJoiner names = new StringJoiner(", ");
    live.values().forEach(names::add);
    return live.size() + " live allocation(s): " + names;
  }
}
