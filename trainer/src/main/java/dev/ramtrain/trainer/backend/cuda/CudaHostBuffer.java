package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuMemFreeHost;
import static jcuda.driver.JCudaDriver.cuMemHostRegister;
import static jcuda.driver.JCudaDriver.cuMemHostUnregister;

import dev.ramtrain.trainer.backend.ByteSize;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.MemoryLedger;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jcuda.Pointer;
import jcuda.driver.JCudaDriver;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * Page-locked host memory: what asynchronous copies need to overlap. Up to 2 GiB from
 * cuMemHostAlloc; larger (an offloaded ViT-H's masters) from the host's allocator, page-locked in
 * place by cuMemHostRegister, as JCuda's cuMemHostAlloc hands back a Java buffer of the whole
 * allocation, which Java cannot make over 2 GiB.
 */
final class CudaHostBuffer implements HostBuffer {
  private static final long PAGE = 4096;
  private final String label;
  private final long bytes;
  private final Pointer memory;
  private final ByteBuffer buffer; // the first 2 GiB at most: what JCuda's pointer was made of
  private final long allocated; // registered memory's block from the host's allocator, or 0
  private final MemoryLedger ledger;
  private final CudaContext context;
  private volatile boolean freed; // read on every copy without the lock

  private CudaHostBuffer(
      String label,
      long bytes,
      Pointer memory,
      ByteBuffer buffer,
      long allocated,
      MemoryLedger ledger,
      CudaContext context) {
    this.label = label;
    this.bytes = bytes;
    this.memory = memory;
    this.buffer = buffer;
    this.allocated = allocated;
    this.ledger = ledger;
    this.context = context;
  }

  /** {@code bytes} of pinned memory, zeroed; the context is current on the calling thread. */
  static CudaHostBuffer allocate(
      String label, long bytes, MemoryLedger ledger, CudaContext context) {
    if (bytes <= MAX_VIEW_BYTES) {
      Pointer memory = new Pointer();
      CudaCalls.check(
          JCudaDriver.cuMemHostAlloc(
              memory, Math.max(1, bytes), JCudaDriver.CU_MEMHOSTALLOC_PORTABLE),
          () -> "allocating " + bytes + " bytes of pinned host memory for " + label);
      ByteBuffer buffer = memory.getByteBuffer(0, Math.max(1, bytes));
      MemoryUtil.setMemory(MemoryUtil.getByteBufferAddress(buffer), Math.max(1, bytes), (byte) 0);
      return new CudaHostBuffer(label, bytes, memory, buffer, 0, ledger, context);
    }
    long block;
    try {
      block = MemoryUtil.allocateMemory(bytes + PAGE);
    } catch (OutOfMemoryError e) {
      throw new OutOfDeviceMemoryException(
          "cuda backend: the host gave no memory for "
              + label
              + " ("
              + ByteSize.of(bytes)
              + " to pin)");
    }
    long start = (block + PAGE - 1) / PAGE * PAGE; // the driver locks whole pages
    MemoryUtil.setMemory(start, bytes, (byte) 0);
    ByteBuffer first = MemoryUtil.directBuffer(start, (int) MAX_VIEW_BYTES);
    Pointer memory = Pointer.to(first);
    int status = cuMemHostRegister(memory, bytes, JCudaDriver.CU_MEMHOSTREGISTER_PORTABLE);
    if (status != jcuda.driver.CUresult.CUDA_SUCCESS) {
      MemoryUtil.freeMemory(block);
    }
    CudaCalls.check(status, () -> "page-locking " + bytes + " bytes of host memory for " + label);
    return new CudaHostBuffer(label, bytes, memory, first, block, ledger, context);
  }

  @Override
  public String label() {
    return label;
  }

  @Override
  public long bytes() {
    return bytes;
  }

  @Override
  public long address() {
    requireLive();
    return MemoryUtil.getByteBufferAddress(buffer);
  }

  @Override
  public ByteBuffer asByteBuffer() {
    requireLive();
    if (bytes > MAX_VIEW_BYTES) {
      throw HostBuffer.tooLargeForOneView(label, bytes);
    }
    return buffer.duplicate().limit((int) bytes).order(ByteOrder.nativeOrder());
  }

  /** The host address {@code byteOffset} bytes in, for the driver's copies. */
  Pointer at(long byteOffset) {
    requireLive();
    return memory.withByteOffset(byteOffset);
  }

  private void requireLive() {
    if (freed) {
      throw new IllegalStateException(label + " was used after it was closed");
    }
  }

  @Override
  public synchronized void close() {
    if (freed) {
      return;
    }
    freed = true;
    context.bind();
    if (allocated == 0) {
      CudaCalls.release(cuMemFreeHost(memory), () -> "freeing pinned host memory " + label);
    } else {
      try {
        CudaCalls.release(
            cuMemHostUnregister(memory), () -> "unlocking pinned host memory " + label);
      } finally {
        MemoryUtil.freeMemory(allocated);
      }
    }
    ledger.closed(this, bytes);
  }
}
