package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** What the probe says about the device it finds, and why it refuses one. */
class CudaProbeTest {
  @Test
  void findsTheEmulatedDevice() {
    CudaProbe.Result found = EmulatorFaults.probeWith();
    assertTrue(found.available(), String.valueOf(found.unavailable()));
    assertEquals(
        "ramtrain CUDA emulator (sm_90, 4.0 GiB, driver API 13.0)", found.device().describe());
  }

  @Test
  void aDriverOlderThanTheKernelsIsRefusedNamingBothVersions() {
    CudaProbe.Result old = EmulatorFaults.probeWith("driver-version=12040");
    assertFalse(old.available());
    assertEquals(
        "the CUDA driver supports CUDA 12.4; ramtrain's kernels need 13.0 or newer (NVIDIA driver"
            + " 580 or newer)",
        old.unavailable());
  }

  @Test
  void aGpuOlderThanTuringIsRefused() {
    CudaProbe.Result volta = EmulatorFaults.probeWith("compute-capability=7.0");
    assertEquals("the GPU is sm_70; ramtrain's kernels need sm_75 or newer", volta.unavailable());
  }
}
