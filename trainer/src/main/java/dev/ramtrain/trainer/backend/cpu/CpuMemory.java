package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.MemoryLedger;
import java.nio.ByteBuffer;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/** The backend's allocations: native memory, accounted in a {@link MemoryLedger}. */
final class CpuMemory {
  private final MemoryLedger ledger = new MemoryLedger();
  private final Runnable beforeFree;

  /**
   * {@code beforeFree} runs before each block is freed: the backend's wait for its streams, whose
   * work may still be writing the block when its owner closes it (a cancelled run unwinding).
   */
  CpuMemory(Runnable beforeFree) {
    this.beforeFree = beforeFree;
  }

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
      beforeFree.run();
      synchronized (CpuMemory.this) {
        if (pointer == null) {
          return;
        }
        ledger.closed(this, bytes);
        pointer.close();
        pointer = null;
      }
    }
  }

  synchronized Allocation allocate(String label, long bytes) {
    Allocation a = new Allocation(bytes);
    ledger.opened(a, label, bytes);
    return a;
  }

  MemoryLedger ledger() {
    return ledger;
  }
}
