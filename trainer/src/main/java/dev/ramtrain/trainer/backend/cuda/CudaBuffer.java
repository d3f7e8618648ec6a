package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.ArgumentChecks;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import jcuda.driver.CUdeviceptr;

/** Device memory: a block of the arena (owned, or shared by a view) and an offset into it. */
final class CudaBuffer implements DeviceBuffer {
  private final String label;
  private final DType dtype;
  private final long count;
  private final DeviceArena.Block block;
  private final long byteOffset;
  private final boolean owner;

  CudaBuffer(
      String label,
      DType dtype,
      long count,
      DeviceArena.Block block,
      long byteOffset,
      boolean owner) {
    this.label = label;
    this.dtype = dtype;
    this.count = count;
    this.block = block;
    this.byteOffset = byteOffset;
    this.owner = owner;
  }

  @Override
  public String label() {
    return label;
  }

  @Override
  public DType dtype() {
    return dtype;
  }

  @Override
  public long count() {
    return count;
  }

  @Override
  public DeviceBuffer view(long offset, long length) {
    ArgumentChecks.checkView(label, offset, length, count);
    return new CudaBuffer(
        label + "[" + offset + ":" + (offset + length) + "]",
        dtype,
        length,
        block,
        byteOffset + offset * dtype.bytes(),
        false);
  }

  @Override
  public DeviceBuffer viewAs(DType type, long offset, long length) {
    ArgumentChecks.checkViewAs(label, type, offset, length, bytes());
    return new CudaBuffer(
        label + "[" + type + "@" + offset + "]", type, length, block, byteOffset + offset, false);
  }

  @Override
  public void close() {
    if (owner) {
      block.free(bytes());
    }
  }

  /** The device address of the first element, checked to be live. */
  CUdeviceptr pointer() {
    requireLive();
    return block.pointer(byteOffset);
  }

  void requireLive() {
    if (!block.live()) {
      throw new IllegalStateException(label + " was used after it was closed");
    }
  }

  void requireType(DType wanted) {
    if (dtype != wanted) {
      throw new IllegalArgumentException(label + " is " + dtype + ", expected " + wanted);
    }
    requireLive();
  }
}
