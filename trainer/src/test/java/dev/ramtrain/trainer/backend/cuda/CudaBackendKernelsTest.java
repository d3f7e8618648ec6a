package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;

/**
 * The conformance suite on the CUDA backend with its own GEMM kernels, on the emulated device
 * (src/test/native): JCuda's JNI code, the driver calls and the kernels' sources all run.
 */
class CudaBackendKernelsTest extends BackendConformanceTest {
  @Override
  protected Backend create() {
    return CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, CudaSpec.ownKernels()));
  }
}
