package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.BackendSpec;

/** The conformance suite on the CUDA backend with GEMM by cuBLAS (emulated over OpenBLAS). */
class CudaBackendCublasTest extends BackendConformanceTest {
  @Override
  protected Backend create() {
    return CudaBackend.open(
        new BackendSpec(BackendSpec.Kind.CUDA, 1, BackendSpec.GemmChoice.CUBLAS));
  }
}
