package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.offload.StreamedInferenceTest;

/**
 * Streamed inference on the emulated CUDA device, every host-device copy slowed: a layer that
 * computed before its slot's load had landed, or a load over a slot still being read, would show as
 * different logits.
 */
class CudaStreamedInferenceTest extends StreamedInferenceTest {
  @Override
  protected Backend open() {
    BackendSpec spec = new BackendSpec(BackendSpec.Kind.CUDA, 2, CudaSpec.defaults());
    return EmulatorFaults.open(spec, "slow-copy-us=500");
  }
}
