package dev.ramtrain.trainer.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.ramtrain.trainer.backend.engines.Backends;
import org.junit.jupiter.api.Test;

/**
 * Backend selection where a GPU is found: the trainer's tests run on the emulated CUDA driver
 * (src/test/native). Where there is none, the jobs module's tests check that cuda is refused with
 * the reason and auto falls back to cpu.
 */
class BackendsTest {
  @Test
  void eachKindOpensItsBackendAndAutoPrefersTheGpu() {
    String[][] expected = {{"CPU", "cpu"}, {"CUDA", "cuda"}, {"AUTO", "cuda"}};
    for (String[] kindAndName : expected) {
      BackendSpec.Kind kind = BackendSpec.Kind.valueOf(kindAndName[0]);
      try (Backend backend = Backends.open(new BackendSpec(kind, 1))) {
        assertEquals(kindAndName[1], backend.name(), kind.toString());
      }
    }
  }

  @Test
  void threadsMustBePositive() {
    assertThrows(IllegalArgumentException.class, () -> new BackendSpec(BackendSpec.Kind.CPU, 0));
  }
}
