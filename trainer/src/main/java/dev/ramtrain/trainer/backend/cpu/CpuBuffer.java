package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.OffsetBuffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;

/** CPU "device" memory: native memory from JavaCPP, freed when the owning buffer closes. */
final class CpuBuffer extends OffsetBuffer<CpuMemory.Allocation> {
  CpuBuffer(
      String label,
      DType dtype,
      long count,
      CpuMemory.Allocation allocation,
      long byteOffset,
      boolean owner) {
    super(label, dtype, count, allocation, byteOffset, owner);
  }

  @Override
  protected DeviceBuffer viewOf(
      String label, DType dtype, long count, CpuMemory.Allocation memory, long byteOffset) {
    return new CpuBuffer(label, dtype, count, memory, byteOffset, false);
  }

  @Override
  protected void free(CpuMemory.Allocation memory) {
    memory.free();
  }

  @Override
  public void requireLive() {
    memory().requireLive(label());
  }

  long address() {
    return memory().address() + byteOffset();
  }

  ByteBuffer byteBuffer() {
    ByteBuffer whole = memory().buffer();
    return whole.slice((int) byteOffset(), (int) bytes()).order(ByteOrder.nativeOrder());
  }

  FloatBuffer floats() {
    requireType(DType.F32);
    return byteBuffer().asFloatBuffer();
  }

  ShortBuffer shorts() {
    requireType(DType.BF16);
    return byteBuffer().asShortBuffer();
  }

  IntBuffer ints() {
    requireType(DType.I32);
    return byteBuffer().asIntBuffer();
  }

  /** A BLAS pointer to the first element. */
  FloatPointer floatPointer() {
    requireType(DType.F32);
    BytePointer memory = memory().pointer();
    return new FloatPointer(memory).position(byteOffset() / Float.BYTES);
  }

  /** A native pointer to the first element, whatever the element type (for oneDNN). */
  Pointer pointer() {
    return new BytePointer(memory().pointer()).position(byteOffset());
  }
}
