package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuMemFreeHost;

import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.MemoryLedger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jcuda.Pointer;
import org.apache.arrow.memory.util.MemoryUtil;

/** Page-locked host memory from cuMemHostAlloc: what asynchronous copies need to overlap. */
final class CudaHostBuffer implements HostBuffer {
  private final String label;
  private final long bytes;
  private final Pointer memory;
  private final ByteBuffer buffer;
  private final MemoryLedger ledger;
  private final CudaContext context;
  private volatile boolean freed; // read on every copy without the lock

  CudaHostBuffer(
      String label, long bytes, Pointer memory, MemoryLedger ledger, CudaContext context) {
    this.label = label;
    this.bytes = bytes;
    this.memory = memory;
    this.ledger = ledger;
    this.context = context;
    this.buffer = memory.getByteBuffer(0, Math.max(1, bytes));
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
    return buffer
        .duplicate()
        .limit((int) Math.min(bytes, Integer.MAX_VALUE))
        .order(ByteOrder.nativeOrder());
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
    CudaCalls.release(cuMemFreeHost(memory), () -> "freeing pinned host memory " + label);
    ledger.closed(this, bytes);
  }
}
