package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.nn.PyTorchGoldenTest;

/** The PyTorch goldens on the CUDA backend with GEMM by cuBLAS and convolutions by cuDNN. */
class CudaLibrariesPyTorchGoldenTest extends PyTorchGoldenTest {
  @Override
  protected Backend create() {
    return CudaBackend.open(
        new BackendSpec(BackendSpec.Kind.CUDA, 1, CudaBackendLibrariesTest.LIBRARIES));
  }
}
