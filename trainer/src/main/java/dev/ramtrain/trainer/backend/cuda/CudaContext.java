package dev.ramtrain.trainer.backend.cuda;

import static jcuda.driver.JCudaDriver.cuCtxSetCurrent;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRelease;
import static jcuda.driver.JCudaDriver.cuDevicePrimaryCtxRetain;

import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;

/**
 * The device's primary context (the one the CUDA runtime and PyTorch share), made current on
 * whichever thread calls the driver: the loader's workers, the host optimizer's threads and the
 * trainer all reach the backend from their own threads, and a driver call from a thread without a
 * current context fails.
 */
final class CudaContext implements AutoCloseable {
  private final CUdevice device;
  private final CUcontext context = new CUcontext();
  private final ThreadLocal<Boolean> current = ThreadLocal.withInitial(() -> false);
  private boolean released;

  CudaContext(CUdevice device) {
    this.device = device;
    CudaCalls.check(cuDevicePrimaryCtxRetain(context, device), "retaining the primary context");
  }

  /** Makes the context current on the calling thread, once per thread. */
  void bind() {
    if (!current.get()) {
      CudaCalls.check(cuCtxSetCurrent(context), "making the context current");
      current.set(true);
    }
  }

  @Override
  public synchronized void close() {
    if (!released) {
      released = true;
      CudaCalls.release(cuDevicePrimaryCtxRelease(device), () -> "releasing the primary context");
    }
  }
}
