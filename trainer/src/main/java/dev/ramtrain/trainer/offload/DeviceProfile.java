package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmOperand;

/**
 * What the plan needs to know of a device: its memory, the host-to-device bandwidth from pinned
 * memory, the FLOP rate training reaches on it (fp32 GEMM rate, or bf16 where weights are bf16),
 * whether it computes on the host's own cores (the cpu backend: copies then take compute's cores
 * instead of running beside it), and the largest single allocation it makes (the cpu backend's
 * kernels view a buffer whole, up to 2 GiB: a resident slab of parameters must fit one).
 */
public record DeviceProfile(
    String name,
    long memoryBytes,
    double copyBytesPerSecond,
    double flopsPerSecond,
    boolean sharesHostCores,
    long largestAllocationBytes) {
  public DeviceProfile {
    if (memoryBytes <= 0
        || copyBytesPerSecond <= 0
        || flopsPerSecond <= 0
        || largestAllocationBytes <= 0) {
      throw new IllegalArgumentException(
          "device profile "
              + name
              + ": memory, bandwidth, FLOP rate and largest allocation must be positive");
    }
  }

  /**
   * A device with cores of its own (a GPU): its copies run beside its compute, and one allocation
   * may take all of its memory.
   */
  public DeviceProfile(
      String name, long memoryBytes, double copyBytesPerSecond, double flopsPerSecond) {
    this(name, memoryBytes, copyBytesPerSecond, flopsPerSecond, false, Long.MAX_VALUE);
  }

  /** What the plan needs to place layers, which depends on memory only: rates unmeasured. */
  public static DeviceProfile unmeasured(Backend backend, long memoryBytes) {
    return new DeviceProfile(
        "unmeasured",
        memoryBytes,
        1,
        1,
        backend.sharesHostCores(),
        backend.largestAllocationBytes());
  }

  /**
   * A profile of {@code backend} as it runs here: the best of three timed 64 MiB host-to-device
   * copies from pinned memory and three 1024³ fp32 GEMMs; {@code memoryBytes} is given (the CPU
   * backend's "device" memory is the host's).
   */
  public static DeviceProfile measure(Backend backend, String name, long memoryBytes) {
    int n = 1024;
    long bytes = 64L << 20;
    try (Stream s = backend.createStream("profile");
        HostBuffer host = backend.allocateHost("profile.host", bytes);
        DeviceBuffer device = backend.allocate("profile.device", DType.U8, bytes);
        DeviceBuffer a = backend.allocate("profile.a", DType.F32, (long) n * n);
        DeviceBuffer c = backend.allocate("profile.c", DType.F32, (long) n * n)) {
      backend.run(s, new Fill(a, 0.5f));
      double copy = Double.MAX_VALUE;
      double gemm = Double.MAX_VALUE;
      for (int round = 0; round < 3; round++) {
        long t0 = System.nanoTime();
        backend.copy(host, 0, device, bytes, s);
        s.synchronize();
        long t1 = System.nanoTime();
        backend.run(
            s,
            new Gemm(
                n, n, n, 1f, GemmOperand.of(a, n), GemmOperand.of(a, n), 0f, GemmOperand.of(c, n)));
        s.synchronize();
        long t2 = System.nanoTime();
        copy = Math.min(copy, (t1 - t0) / 1e9);
        gemm = Math.min(gemm, (t2 - t1) / 1e9);
      }
      return new DeviceProfile(
          name,
          memoryBytes,
          bytes / copy,
          2.0 * n * n * n / gemm,
          backend.sharesHostCores(),
          backend.largestAllocationBytes());
    }
  }
}
