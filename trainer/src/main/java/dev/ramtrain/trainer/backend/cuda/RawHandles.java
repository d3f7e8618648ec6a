package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuMemcpyDtoH;
import static jcuda.driver.JCudaDriver.cuMemcpyHtoD;

import jcuda.NativePointerObject;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * The raw value of a JCuda handle (a device address, a stream), which NVIDIA's libraries take
 * through JavaCPP. JCuda keeps the value inside its objects and offers no getter; a host pointer to
 * the handle ({@link Pointer#to(NativePointerObject...)}, what a kernel argument is) points at the
 * value itself, so copying those 8 bytes to device memory and back reads it without reflection.
 * Runs once per arena chunk and once per stream.
 */
final class RawHandles {
  private RawHandles() {}

  /** {@code handle}'s value, copied through {@code word}: 8 bytes of device memory nobody uses. */
  static long of(NativePointerObject handle, CUdeviceptr word, CudaContext context) {
    context.bind();
    long[] value = new long[1];
    CudaCalls.check(
        cuMemcpyHtoD(word, Pointer.to(handle), Long.BYTES), "copying a handle to the device");
    CudaCalls.check(
        cuMemcpyDtoH(Pointer.to(value), word, Long.BYTES), "copying a handle from the device");
    return value[0];
  }
}
