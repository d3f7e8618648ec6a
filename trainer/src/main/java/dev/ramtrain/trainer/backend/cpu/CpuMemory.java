package dev.ramtrain.trainer.backend.cpu;

import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.StringJoiner;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/** The backend's allocations: native memory, the live set (for leak reports) and the peak. */
final class CpuMemory {
  private final Map<Allocation, String> live = new LinkedHashMap<>();
  private long allocated;
  private long peak;
  private long count;

  /** One block of native memory; at most 2 GiB, as Java buffers index with ints. */
  final class Allocation {
    private BytePointer pointer;
    private final ByteBuffer buffer;
    private final long bytes;

    private Allocation(long bytes) {
      if (bytes > Integer.MAX_VALUE) {
        throw new IllegalArgumentException(
            "CPU allocations are limited to 2 GiB, asked for " + bytes + " bytes");
      }
      this.bytes = bytes;
      this.pointer = new BytePointer(Math.max(1, bytes));
      Pointer.memset(pointer, 0, Math.max(1, bytes));
      this.buffer = pointer.capacity(Math.max(1, bytes)).asByteBuffer();
    }

    long address() {
      return pointer.address();
    }

    BytePointer pointer() {
      return pointer;
    }

    ByteBuffer buffer() {
      return buffer.duplicate();
    }

    void requireLive(String label) {
      if (pointer == null) {
        throw new IllegalStateException(label + " was used after it was closed");
      }
    }

    void free() {
      synchronized (CpuMemory.this) {
        if (pointer == null) {
          return;
        }
        live.remove(this);
        allocated -= bytes;
        pointer.close();
        pointer = null;
      }
    }
  }

  synchronized Allocation allocate(String label, long bytes) {
    Allocation a = new Allocation(bytes);
    live.put(a, label + " (" + bytes + " bytes)");
    allocated += bytes;
    peak = Math.max(peak, allocated);
    count++;
    return a;
  }

  synchronized long allocated() {
    return allocated;
  }

  synchronized long peak() {
    return peak;
  }

  synchronized void resetPeak() {
    peak = allocated;
  }

  /** Allocations made so far, freed or not. */
  synchronized long count() {
    return count;
  }

  /** Null when nothing is live, else the leaked allocations by label. */
  synchronized String leaks() {
    if (live.isEmpty()) {
      return null;
    }
    StringJoiner names = new StringJoiner(", ");
    live.values().forEach(names::add);
    return live.size() + " live allocation(s): " + names;
  }
}
