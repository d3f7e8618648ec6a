package dev.ramtrain.trainer.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class BackendsTest {
  @Test
  void cpuAndAutoOpenTheCpuBackendWhereThereIsNoCuda() {
    for (BackendSpec.Kind kind :
        new BackendSpec.Kind[] {BackendSpec.Kind.CPU, BackendSpec.Kind.AUTO}) {
      try (Backend backend = Backends.open(new BackendSpec(kind, 1))) {
        assertEquals("cpu", backend.name(), kind.toString());
      }
    }
  }

  @Test
  void cudaIsRefusedWithTheReasonWhenItCannotBeOpened() {
    var e =
        assertThrows(
            BackendUnavailableException.class,
            () -> Backends.open(new BackendSpec(BackendSpec.Kind.CUDA, 1)));
    assertTrue(e.getMessage().contains("CUDA"), e.getMessage());
  }

  @Test
  void threadsMustBePositive() {
    assertThrows(IllegalArgumentException.class, () -> new BackendSpec(BackendSpec.Kind.CPU, 0));
  }
}
