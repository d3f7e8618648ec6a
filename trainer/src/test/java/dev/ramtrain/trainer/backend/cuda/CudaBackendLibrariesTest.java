package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite on the CUDA backend with GEMM by cuBLAS and convolutions by cuDNN (both
 * insisted on; emulated over OpenBLAS by libcublas.so.13 and libcudnn_*.so.9 stubs whose algorithm
 * rankings trap an engine that ignores workspace limits or determinism).
 */
class CudaBackendLibrariesTest extends BackendConformanceTest {
  static final CudaSpec LIBRARIES =
      CudaSpec.defaults().withGemm(CudaSpec.GemmChoice.CUBLAS).withConv(CudaSpec.ConvChoice.CUDNN);

  @Override
  protected Backend create() {
    return CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, LIBRARIES));
  }

  @Test
  void theLibrariesRunTheGemmsAndConvolutions() {
    try (CudaBackend backend =
        CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, LIBRARIES))) {
      String described = backend.describe();
      assertTrue(described.contains("GEMM by cuBLAS 13."), described);
      assertTrue(described.contains("convolutions by cuDNN 9."), described);
    }
  }
}
