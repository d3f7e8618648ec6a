package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.HostBuffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/** Host memory of the CPU backend (there is no separate pinned memory on a CPU). */
final class CpuHostBuffer implements HostBuffer {
  private final String label;
  private final long bytes;
  private final CpuMemory.Allocation allocation;

  CpuHostBuffer(String label, long bytes, CpuMemory.Allocation allocation) {
    this.label = label;
    this.bytes = bytes;
    this.allocation = allocation;
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
    allocation.requireLive(label);
    return allocation.address();
  }

  @Override
  public ByteBuffer asByteBuffer() {
    allocation.requireLive(label);
    if (bytes > MAX_VIEW_BYTES) {
      throw HostBuffer.tooLargeForOneView(label, bytes);
    }
    return allocation.buffer().limit((int) bytes).order(ByteOrder.nativeOrder());
  }

  @Override
  public void close() {
    allocation.free();
  }
}
