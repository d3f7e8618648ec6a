package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.CpuEngine;

/** The conformance suite on the plain-Java engine: the reference oneDNN is checked against. */
class CpuJavaEngineTest extends BackendConformanceTest {
  @Override
  protected Backend create() {
    return new CpuBackend(2, CpuEngine.JAVA);
  }
}
