package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.ByteSize;
import dev.ramtrain.trainer.backend.MemoryLedger;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import java.nio.ByteBuffer;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * The backend's allocations: native memory from calloc, accounted in a {@link MemoryLedger} and
 * held within a limit. Outside JavaCPP's accounting on purpose: that stops at the JVM's heap size
 * (its default maxBytes), a second budget the plan knew nothing of; this one's limit is the plan's.
 * Each block is freed by its owner's close; calloc's fresh pages cost nothing until written.
 */
final class CpuMemory {
  private final MemoryLedger ledger = new MemoryLedger();
  private final Runnable beforeFree;
  private final CpuMemoryLimit limit; // null: host memory, bounded by the plan's pinned check

  /**
   * {@code beforeFree} runs before each block is freed: the backend's wait for its streams, whose
   * work may still be writing the block when its owner closes it (a cancelled run unwinding).
   */
  CpuMemory(Runnable beforeFree, CpuMemoryLimit limit) {
    this.beforeFree = beforeFree;
    this.limit = limit;
  }

  /**
   * One block of native memory. A device block is at most 2 GiB, as the kernels view it whole
   * through one Java buffer; a host block may be larger ({@link
   * dev.ramtrain.trainer.backend.HostBuffer#range}: it is read a range at a time).
   */
  final class Allocation {
    private BytePointer pointer;
    private final ByteBuffer buffer; // null: over 2 GiB, no whole view
    private final long bytes;

    private Allocation(String label, long bytes) {
      if (bytes > Integer.MAX_VALUE && limit != null) { // a batch or an image too large: usage
        throw new OutOfDeviceMemoryException(
            String.format(
                "cpu backend: %s needs %s in one allocation, and one holds at most 2 GiB (Java"
                    + " buffers index with ints); use a smaller --batch-size or image size",
                label, ByteSize.of(bytes)));
      }
      this.bytes = bytes;
      Pointer block = Pointer.calloc(Math.max(1, bytes), 1);
      if (block == null || block.isNull()) {
        throw new OutOfDeviceMemoryException(
            "cpu backend: the host gave no memory for " + label + " (" + ByteSize.of(bytes) + ")");
      }
      this.pointer = new BytePointer(block).capacity(Math.max(1, bytes));
      this.buffer = bytes <= Integer.MAX_VALUE ? pointer.asByteBuffer() : null;
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
      beforeFree.run();
      synchronized (CpuMemory.this) {
        if (pointer == null) {
          return;
        }
        ledger.closed(this, bytes);
        Pointer.free(pointer);
        pointer = null;
      }
    }
  }

  synchronized Allocation allocate(String label, long bytes) {
    long inUse = ledger.allocated();
    if (limit != null && bytes > limit.bytes() - inUse) {
      throw new OutOfDeviceMemoryException(
          String.format(
              "cpu backend: %s needs %s, and %s of its %s are in use (%s; raise it, or use a"
                  + " smaller --batch-size)",
              label,
              ByteSize.of(bytes),
              ByteSize.of(inUse),
              ByteSize.of(limit.bytes()),
              limit.source()));
    }
    Allocation a = new Allocation(label, bytes);
    ledger.opened(a, label, bytes);
    return a;
  }

  MemoryLedger ledger() {
    return ledger;
  }

  /** What may still be allocated within the limit (for host memory, what the host has). */
  long freeBytes() {
    return limit == null ? Long.MAX_VALUE : Math.max(0, limit.bytes() - ledger.allocated());
  }
}
