package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.BackendUnavailableException;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import org.junit.jupiter.api.Test;

/** What the probe says about the device it finds, and why it refuses one. */
class CudaProbeTest {
  @Test
  void findsTheEmulatedDevice() {
    CudaProbe.Result found = EmulatorFaults.probeWith();
    assertTrue(found.available(), String.valueOf(found.unavailable()));
    assertEquals(
        "device 0: ramtrain CUDA emulator (sm_90, 4.0 GiB, driver API 13.0)",
        found.device().describe());
  }

  /**
   * A Spark task assigned GPU 1 drives CUDA device 1: probed, opened and used like device 0; a
   * device the driver does not have is refused naming both counts.
   */
  @Test
  void opensTheDeviceOfTheOrdinalAsked() {
    BackendSpec second = new BackendSpec(BackendSpec.Kind.CUDA, 1).onDevice(1);
    try (CudaBackend backend = (CudaBackend) EmulatorFaults.open(second, "devices=2")) {
      assertTrue(backend.describe().startsWith("device 1: "), backend.describe());
      try (Stream s = backend.createStream("s");
          DeviceBuffer b = backend.allocate("x", DType.F32, 3);
          HostBuffer h = backend.allocateHost("h", 12)) {
        backend.run(s, new Fill(b, 2.5f));
        backend.copy(b, h, 0, 12, s);
        s.synchronize();
        float[] back = new float[3];
        h.asByteBuffer().order(java.nio.ByteOrder.nativeOrder()).asFloatBuffer().get(back);
        assertArrayEquals(new float[] {2.5f, 2.5f, 2.5f}, back);
      }
    }
    BackendUnavailableException missing =
        assertThrows(BackendUnavailableException.class, () -> EmulatorFaults.open(second));
    assertEquals(
        "backend cuda: device 1 was asked for, and the CUDA driver sees 1 GPU",
        missing.getMessage());
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
