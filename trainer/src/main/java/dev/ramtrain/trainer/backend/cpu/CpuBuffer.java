package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.ArgumentChecks;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.ShortBuffer;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;

/** CPU "device" memory: native memory from JavaCPP, freed when the owning buffer closes. */
final class CpuBuffer implements DeviceBuffer {
  private final String label;
  private final DType dtype;
  private final long count;
  private final CpuMemory.Allocation allocation; // the owner's; shared by views
  private final long byteOffset;
  private final boolean owner;

  CpuBuffer(
      String label,
      DType dtype,
      long count,
      CpuMemory.Allocation allocation,
      long byteOffset,
      boolean owner) {
    this.label = label;
    this.dtype = dtype;
    this.count = count;
    this.allocation = allocation;
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
    return new CpuBuffer(
        label + "[" + offset + ":" + (offset + length) + "]",
        dtype,
        length,
        allocation,
        byteOffset + offset * dtype.bytes(),
        false);
  }

  @Override
  public DeviceBuffer viewAs(DType type, long offset, long length) {
    ArgumentChecks.checkViewAs(label, type, offset, length, bytes());
    return new CpuBuffer(
        label + "[" + type + "@" + offset + "]",
        type,
        length,
        allocation,
        byteOffset + offset,
        false);
  }

  @Override
  public void close() {
    if (owner) {
      allocation.free();
    }
  }

  long address() {
    return allocation.address() + byteOffset;
  }

  ByteBuffer byteBuffer() {
    ByteBuffer whole = allocation.buffer();
    return whole.slice((int) byteOffset, (int) bytes()).order(ByteOrder.nativeOrder());
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
    BytePointer memory = allocation.pointer();
    return new FloatPointer(memory).position(byteOffset / Float.BYTES);
  }

  /** A native pointer to the first element, whatever the element type (for oneDNN). */
  Pointer pointer() {
    return new BytePointer(allocation.pointer()).position(byteOffset);
  }

  void requireLive() {
    allocation.requireLive(label);
  }

  void requireType(DType wanted) {
    if (dtype != wanted) {
      throw new IllegalArgumentException(label + " is " + dtype + ", expected " + wanted);
    }
    allocation.requireLive(label);
  }
}
