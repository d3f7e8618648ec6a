package dev.ramtrain.trainer.offload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import org.junit.jupiter.api.Test;

class HostProfileTest {
  /**
   * Measured within a run's pinned bytes, the triad's arrays are freed before the run allocates its
   * own (closing the backend checks that nothing is left), and the rate is a real one.
   */
  @Test
  void aMeasuredHostHasAFiniteBandwidthAndKeepsNothing() {
    HostProfile host;
    try (Backend b = new CpuBackend(1)) {
      host = HostProfile.measure(b, 1, 3L << 20);
      assertEquals(0, b.allocatedHostBytes(), "the triad's buffers are freed");
    }
    assertTrue(host.measured(), host.toString());
    assertTrue(Double.isFinite(host.bandwidthBytesPerSecond()), host.toString());
    assertTrue(host.bandwidthBytesPerSecond() > 0, host.toString());
    assertEquals("measured (1 thread)", host.name());
  }

  @Test
  void aBandwidthMustBePositiveAndAnUnmeasuredHostSaysSo() {
    for (double bad : new double[] {0, -1, Double.NaN}) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> new HostProfile("given", bad));
      assertTrue(e.getMessage().contains("host profile given"), e.getMessage());
    }
    assertFalse(HostProfile.UNMEASURED.measured());
  }
}
