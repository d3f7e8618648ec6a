package dev.ramtrain.trainer.backend.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
      // oneDNN's blocking for this CPU: a zmm of floats with AVX-512, a ymm below it
      int block = auto.channelBlock();
      assertTrue(block == 16 || block == 8, "channel block " + block);
    }
    try (CpuBackend java = new CpuBackend(1, CpuEngine.JAVA)) {
      assertEquals("java", java.engine());
      assertEquals(1, java.channelBlock(), "the Java kernels compute on NCHW");
    }
  }
}
