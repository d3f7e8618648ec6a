package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.OffsetBuffer;
import jcuda.driver.CUdeviceptr;

/** Device memory: a block of the arena (owned, or shared by a view) and an offset into it. */
final class CudaBuffer extends OffsetBuffer<DeviceArena.Block> {
  CudaBuffer(
      String label,
      DType dtype,
      long count,
      DeviceArena.Block block,
      long byteOffset,
      boolean owner) {
    super(label, dtype, count, block, byteOffset, owner);
  }

  @Override
  protected DeviceBuffer viewOf(
      String label, DType dtype, long count, DeviceArena.Block memory, long byteOffset) {
    return new CudaBuffer(label, dtype, count, memory, byteOffset, false);
  }

  @Override
  protected void free(DeviceArena.Block memory) {
    memory.free(bytes());
  }

  /** The device address of the first element, checked to be live. */
  CUdeviceptr pointer() {
    requireLive();
    return memory().pointer(byteOffset());
  }

  /** The raw device address of the first element, checked to be live (for NVIDIA's libraries). */
  DevicePointer address() {
    requireLive();
    return new DevicePointer(memory().address(byteOffset()));
  }

  @Override
  public void requireLive() {
    if (!memory().live()) {
      throw new IllegalStateException(label() + " was used after it was closed");
    }
  }
}
