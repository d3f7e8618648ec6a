package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.nn.PyTorchGoldenTest;

/**
 * The PyTorch goldens on the CUDA backend's own kernels (on the emulator: the kernels' own
 * sources).
 */
class CudaPyTorchGoldenTest extends PyTorchGoldenTest {
  @Override
  protected Backend create() {
    return CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, CudaSpec.ownKernels()));
  }
}
