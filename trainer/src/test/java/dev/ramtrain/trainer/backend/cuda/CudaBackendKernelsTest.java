package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite on the CUDA backend with its own GEMM kernels, on the emulated device
 * (src/test/native): JCuda's JNI code, the driver calls and the kernels' sources all run.
 */
class CudaBackendKernelsTest extends BackendConformanceTest {
  @Override
  protected Backend create() {
    return CudaBackend.open(new BackendSpec(BackendSpec.Kind.CUDA, 1, CudaSpec.ownKernels()));
  }

  /**
   * Batch norm over channels of 9,000 and 12,500 values, which the kernels split into two chunks
   * whose edges fall inside an image ({@link BatchNormChunks}): the sums stay in double, so the
   * suite's tolerances hold as for one chunk.
   */
  @Test
  void batchNormSplitsLongChannelsIntoChunks() {
    checkBatchNormTraining(5, 3, 3_000, 1);
    checkBatchNormBackward(3, 5, 2_500, 1);
  }
}
