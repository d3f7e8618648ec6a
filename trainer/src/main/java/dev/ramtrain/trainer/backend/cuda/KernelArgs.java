package dev.ramtrain.trainer.backend.cuda;

import java.util.ArrayList;
import java.util.List;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * A kernel's parameters in declaration order, typed as the CUDA signature declares them (int is 32
 * bits, long long 64): the driver copies each one's bytes at launch.
 */
final class KernelArgs {
  private final List<Pointer> values = new ArrayList<>();

  KernelArgs buffer(CudaBuffer buffer) {
    values.add(Pointer.to(buffer.pointer()));
    return this;
  }

  KernelArgs pointer(CUdeviceptr pointer) {
    values.add(Pointer.to(pointer));
    return this;
  }

  KernelArgs i32(int value) {
    values.add(Pointer.to(new int[] {value}));
    return this;
  }

  KernelArgs i32(boolean value) {
    return i32(value ? 1 : 0);
  }

  KernelArgs i64(long value) {
    values.add(Pointer.to(new long[] {value}));
    return this;
  }

  KernelArgs f32(float value) {
    values.add(Pointer.to(new float[] {value}));
    return this;
  }

  /** A struct of floats passed by value (RtChannelAffine). */
  KernelArgs floats(float[] struct) {
    values.add(Pointer.to(struct.clone()));
    return this;
  }

  Pointer pack() {
    return Pointer.to(values.toArray(new Pointer[0]));
  }
}
