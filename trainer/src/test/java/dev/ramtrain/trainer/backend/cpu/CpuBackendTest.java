package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;

class CpuBackendTest extends BackendConformanceTest {
  @Override
  protected Backend create() {
    return new CpuBackend(2);
  }
}
