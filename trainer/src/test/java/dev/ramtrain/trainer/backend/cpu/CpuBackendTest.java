package dev.ramtrain.trainer.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendConformanceTest;
import dev.ramtrain.trainer.backend.CpuEngine;
import org.junit.jupiter.api.Test;

/** The conformance suite on the CPU backend as runs get it: convolutions by oneDNN. */
class CpuBackendTest extends BackendConformanceTest {
  @Override
  protected Backend create() {
    return new CpuBackend(2, CpuEngine.ONEDNN);
  }

  @Test
  void theAutomaticEngineIsOneDnnWhereItsNativesLoad() {
    try (CpuBackend auto = new CpuBackend(1)) {
      assertEquals("onednn", auto.engine());
    }
    try (CpuBackend java = new CpuBackend(1, CpuEngine.JAVA)) {
      assertEquals("java", java.engine());
    }
  }
}
