package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;

import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.MemoryLedger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUresult;

/**
 * The backend's device memory: a few large driver allocations (chunks) carved into buffers, first
 * fit, with freed blocks merged back. cuMemAlloc synchronizes the device and is slow, so it runs
 * only when the arena grows: a run that sets up its buffers and then trains never calls it inside a
 * step, and {@link #reserve} takes the planner's whole budget in one chunk up front. Blocks are
 * aligned to 256 bytes, as cudaMalloc's are, so any element type and vector load fits.
 */
final class DeviceArena implements AutoCloseable {
  static final long ALIGNMENT = 256;
  private static final long MIN_CHUNK = 64L << 20;

  private final List<Chunk> chunks = new ArrayList<>();
  private final MemoryLedger ledger = new MemoryLedger();
  private final Runnable beforeGiveBack;

  /** {@code beforeGiveBack} runs before a freed block returns to the arena (the streams' drain). */
  DeviceArena(Runnable beforeGiveBack) {
    this.beforeGiveBack = beforeGiveBack;
  }

  /** One driver allocation and its free blocks (offset to size). */
  private static final class Chunk {
    final CUdeviceptr base;
    final long address; // base's raw value, for NVIDIA's libraries
    final long size;
    final TreeMap<Long, Long> free = new TreeMap<>();

    Chunk(CUdeviceptr base, long address, long size) {
      this.base = base;
      this.address = address;
      this.size = size;
      free.put(0L, size);
    }
  }

  /** A buffer's memory: valid until {@link #free}. */
  final class Block {
    private final Chunk chunk;
    private final long offset;
    private final long size;
    private volatile boolean freed; // read on every launch without the arena's lock

    private Block(Chunk chunk, long offset, long size) {
      this.chunk = chunk;
      this.offset = offset;
      this.size = size;
    }

    CUdeviceptr pointer(long byteOffset) {
      return chunk.base.withByteOffset(offset + byteOffset);
    }

    /** The raw device address {@code byteOffset} bytes into the block. */
    long address(long byteOffset) {
      return chunk.address + offset + byteOffset;
    }

    boolean live() {
      return !freed;
    }

    void free(long requestedBytes) {
      if (!freed) {
        beforeGiveBack.run(); // outside the arena's lock: other threads allocate meanwhile
      }
      synchronized (DeviceArena.this) {
        if (freed) {
          return;
        }
        freed = true;
        ledger.closed(this, requestedBytes);
        giveBack(chunk, offset, size);
      }
    }
  }

  /** A block of at least {@code bytes} (zero allowed), recorded under {@code label}. */
  synchronized Block take(String label, long bytes, CudaContext context) {
    long size = Math.max(ALIGNMENT, (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT);
    Block block = firstFit(size);
    if (block == null) {
      grow(Math.max(size, MIN_CHUNK), label, bytes, context);
      block = firstFit(size);
    }
    ledger.opened(block, label, bytes);
    return block;
  }

  /** Grows the arena so that one block of {@code bytes} fits without another driver call. */
  synchronized void reserve(long bytes, CudaContext context) {
    long size = (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    if (largestFree() < size) {
      grow(size, "the reserved budget", bytes, context);
    }
  }

  private Block firstFit(long size) {
    for (Chunk chunk : chunks) {
      for (Map.Entry<Long, Long> hole : chunk.free.entrySet()) {
        if (hole.getValue() >= size) {
          // Read before removing: TreeMap may move another hole's key and size into this entry.
          long offset = hole.getKey();
          long holeSize = hole.getValue();
          chunk.free.remove(offset);
          if (holeSize > size) {
            chunk.free.put(offset + size, holeSize - size);
          }
          return new Block(chunk, offset, size);
        }
      }
    }
    return null;
  }

  private void giveBack(Chunk chunk, long offset, long size) {
    Map.Entry<Long, Long> after = chunk.free.ceilingEntry(offset);
    if (after != null && after.getKey() == offset + size) {
      size += after.getValue();
      chunk.free.remove(after.getKey());
    }
    Map.Entry<Long, Long> before = chunk.free.floorEntry(offset);
    if (before != null && before.getKey() + before.getValue() == offset) {
      offset = before.getKey();
      size += before.getValue();
    }
    chunk.free.put(offset, size);
  }

  private void grow(long size, String label, long requested, CudaContext context) {
    context.bind();
    CUdeviceptr base = new CUdeviceptr();
    int result = cuMemAlloc(base, size);
    if (result != CUresult.CUDA_SUCCESS) {
      throw new BackendException(
          String.format(
              "cuda: out of device memory allocating %s (%,d bytes): the driver refused %,d more"
                  + " bytes (%s) with %,d bytes held in %d chunk(s), %,d of them in use",
              label,
              requested,
              size,
              CUresult.stringFor(result),
              heldBytes(),
              chunks.size(),
              ledger.allocated()));
    }
    long address;
    try { // a fresh chunk's first 8 bytes are unused: the word its own address is read through
      address = RawHandles.of(base, base, context);
    } catch (RuntimeException e) {
      CudaCalls.release(cuMemFree(base), () -> "freeing a device memory chunk");
      throw e;
    }
    chunks.add(new Chunk(base, address, size));
  }

  private long largestFree() {
    return chunks.stream()
        .flatMap(c -> c.free.values().stream())
        .mapToLong(Long::longValue)
        .max()
        .orElse(0);
  }

  synchronized long heldBytes() {
    return chunks.stream().mapToLong(c -> c.size).sum();
  }

  /** Bytes held from the driver but in no block: the arena's share of the device's free memory. */
  synchronized long freeBytes() {
    return chunks.stream().flatMap(c -> c.free.values().stream()).mapToLong(Long::longValue).sum();
  }

  MemoryLedger ledger() {
    return ledger;
  }

  /** Returns every chunk to the driver; live blocks are the caller's leak to report first. */
  @Override
  public synchronized void close() {
    for (Chunk chunk : chunks) {
      CudaCalls.release(cuMemFree(chunk.base), () -> "freeing a device memory chunk");
    }
    chunks.clear();
  }
}
