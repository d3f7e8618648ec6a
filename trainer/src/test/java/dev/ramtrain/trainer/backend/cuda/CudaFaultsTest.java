package dev.ramtrain.trainer.backend.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gelu;
import dev.ramtrain.trainer.backend.ops.Relu;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Faults a GPU can have, injected by the emulated driver: each surfaces as an error that says what
 * was being done, and the backend still closes, proving nothing leaked.
 */
class CudaFaultsTest {
  private static final BackendSpec SPEC =
      new BackendSpec(BackendSpec.Kind.CUDA, 1, CudaSpec.defaults());

  @Test
  void outOfMemoryNamesTheBufferAndWhatTheArenaHolds() {
    try (Backend b = EmulatorFaults.open(SPEC, "fail-alloc=2")) {
      var e =
          assertThrows(
              BackendException.class, () -> b.allocate("conv9.activations", DType.F32, 40L << 20));
      assertTrue(
          e.getMessage().startsWith("cuda: out of device memory allocating conv9.activations")
              && e.getMessage().contains("CUDA_ERROR_OUT_OF_MEMORY"),
          e.getMessage());
    }
    try (Backend b = EmulatorFaults.open(SPEC, "memory=100000000")) {
      var e = assertThrows(BackendException.class, () -> b.allocate("big", DType.F32, 50_000_000));
      assertTrue(e.getMessage().contains("allocating big (200,000,000 bytes)"), e.getMessage());
      try (DeviceBuffer fits = b.allocate("fits", DType.F32, 1000)) {
        assertTrue(b.freeMemoryBytes() < 100_000_000);
      }
    }
  }

  /** Reserved memory (the plan's budget) serves the buffers after it without the driver. */
  @Test
  void reservedMemoryServesLaterBuffersWithoutTheDriver() {
    try (Backend b = EmulatorFaults.open(SPEC, "fail-alloc=3")) { // 1: the first chunk, 2: reserve
      b.reserve(100L << 20);
      try (DeviceBuffer weights = b.allocate("weights", DType.F32, 20L << 20);
          DeviceBuffer activations = b.allocate("activations", DType.F32, 5L << 20)) {
        assertThrows(BackendException.class, () -> b.allocate("beyond", DType.F32, 30L << 20));
      }
    }
  }

  /**
   * Copies over the bus that land late: device work on another stream that does not wait reads
   * stale memory; with the event's wait it reads the copy.
   */
  @Test
  void slowCopiesExposeAMissingWait() {
    float[] values = {1, 2, 3, 4};
    try (Backend b = EmulatorFaults.open(SPEC, "slow-copy-us=200000")) {
      Stream upload = b.createStream("upload");
      Stream compute = b.createStream("compute");
      try (DeviceBuffer x = b.allocate("x", DType.F32, 4);
          DeviceBuffer racing = b.allocate("racing", DType.F32, 4);
          DeviceBuffer ordered = b.allocate("ordered", DType.F32, 4);
          HostBuffer in = b.allocateHost("in", 16);
          HostBuffer out = b.allocateHost("out", 32);
          Event uploaded = b.createEvent("uploaded")) {
        in.asByteBuffer().asFloatBuffer().put(values);
        b.copy(in, 0, x, 16, upload);
        uploaded.record(upload);
        b.copy(x, racing, compute); // no wait: runs while the upload is still on the bus
        compute.waitFor(uploaded);
        b.copy(x, ordered, compute);
        b.copy(racing, out, 0, 16, compute);
        b.copy(ordered, out, 16, 16, compute);
        compute.synchronize();
        float[] got = new float[8];
        out.asByteBuffer().asFloatBuffer().get(got);
        assertArrayEquals(new float[] {0, 0, 0, 0, 1, 2, 3, 4}, got);
      }
    }
  }

  /**
   * A buffer closed while a copy into it is still to land waits for it, as cudaFree does: the arena
   * hands the block to the next allocation at once, and a run cancelled mid-step closes its buffers
   * while its streams still work.
   */
  @Test
  void closingABufferWaitsForTheWorkStillWritingIt() {
    assertTrue(
        copyLandedBeforeClosing(false), "dst went back to the arena while the copy into it ran");
  }

  /**
   * Pinned memory freed while a copy still reads it waits for the copy, as cuMemFreeHost does on a
   * GPU (the emulator drains the context's streams first, as the driver synchronizes).
   */
  @Test
  void freeingPinnedMemoryWaitsForTheCopyReadingIt() {
    assertTrue(copyLandedBeforeClosing(true), "src was freed while the copy from it still ran");
  }

  /**
   * Whether a host-to-device copy that waits 200 ms on the emulated bus had landed when its source
   * ({@code closeSource}) or its destination had been closed right after it was enqueued. Whatever
   * that close did, the event and the other buffer outlive the copy.
   */
  private static boolean copyLandedBeforeClosing(boolean closeSource) {
    try (Backend b = EmulatorFaults.open(SPEC, "slow-copy-us=200000")) {
      Stream copies = b.createStream("copies");
      Event copied = b.createEvent("copied");
      HostBuffer src = b.allocateHost("src", 16);
      DeviceBuffer dst = b.allocate("dst", DType.F32, 4);
      b.copy(src, 0, dst, 16, copies);
      copied.record(copies);
      if (closeSource) {
        src.close();
      } else {
        dst.close();
      }
      boolean landed = copied.isDone();
      copies.synchronize();
      copied.close();
      if (closeSource) {
        dst.close();
      } else {
        src.close();
      }
      return landed;
    }
  }

  @Test
  void aFailingKernelSurfacesAtSynchronizeAndTheBackendStillCloses() {
    try (Backend b = EmulatorFaults.open(SPEC, "fail-launch=relu_f32")) {
      Stream s = b.createStream("compute");
      try (DeviceBuffer x = b.allocate("x", DType.F32, 100);
          DeviceBuffer y = b.allocate("y", DType.F32, 100);
          HostBuffer staging = b.allocateHost("staging", 400)) {
        b.run(s, new Relu(x, y));
        var e = assertThrows(BackendException.class, s::synchronize);
        assertTrue(
            e.getMessage().equals("work on stream 'compute' failed: CUDA_ERROR_LAUNCH_FAILED"),
            e.getMessage());
        var later = assertThrows(BackendException.class, () -> b.run(s, new Fill(x, 1f)));
        assertTrue(
            later.getMessage().startsWith("cuda: launching fill_f32 on stream 'compute'"),
            later.getMessage());
      }
    }
  }

  @Test
  void aLostDeviceFailsTheNextLaunchNamingItAndTheBackendStillCloses(@TempDir Path tmp) {
    Path unplugged = tmp.resolve("unplugged");
    try (Backend b = EmulatorFaults.open(SPEC, "lose-device-when=" + unplugged)) {
      Stream s = b.createStream("compute");
      try (DeviceBuffer x = b.allocate("x", DType.F32, 100)) {
        b.run(s, new Fill(x, 1f));
        b.run(s, new Relu(x, x));
        s.synchronize();
        Files.writeString(unplugged, "gone");
        var e = assertThrows(BackendException.class, () -> b.run(s, new Gelu(x, x)));
        assertTrue(
            e.getMessage()
                .equals(
                    "cuda: launching gelu_f32 on stream 'compute' (grid 1x1x1, block 256x1)"
                        + " failed: CUDA_ERROR_UNKNOWN"),
            e.getMessage());
        assertThrows(BackendException.class, s::synchronize);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
