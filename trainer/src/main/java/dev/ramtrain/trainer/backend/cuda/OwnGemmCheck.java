package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Convert;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmOperand;
import java.nio.FloatBuffer;

/**
 * Checks the backend's own bf16 GEMM kernel (tensor cores on sm_80 and newer, a path only a GPU
 * runs) against its fp32 kernel when the backend opens, on every transpose, on values whose
 * products and sums are exact in fp32 (multiples of 1/4, 40 terms): any summation order gives the
 * same bits, so the two must agree exactly. A kernel that is wrong on this GPU then stops the
 * backend at start, naming the device, instead of training wrongly.
 */
final class OwnGemmCheck {
  private static final int M = 70;
  private static final int N = 90;
  private static final int K = 40;

  private OwnGemmCheck() {}

  static void verify(Backend backend, KernelGemm own, CudaStream stream, String device) {
    float[] a = new float[M * K];
    float[] b = new float[K * N];
    for (int i = 0; i < a.length; i++) {
      a[i] = (i * 7 % 9 - 4) / 4f;
    }
    for (int i = 0; i < b.length; i++) {
      b[i] = (i * 5 % 11 - 5) / 4f;
    }
    try (DeviceBuffer fa = backend.allocate("gemm-check.a", DType.F32, a.length);
        DeviceBuffer fb = backend.allocate("gemm-check.b", DType.F32, b.length);
        DeviceBuffer ha = backend.allocate("gemm-check.a.bf16", DType.BF16, a.length);
        DeviceBuffer hb = backend.allocate("gemm-check.b.bf16", DType.BF16, b.length);
        DeviceBuffer c32 = backend.allocate("gemm-check.c32", DType.F32, (long) M * N);
        DeviceBuffer c16 = backend.allocate("gemm-check.c16", DType.F32, (long) M * N);
        HostBuffer host = backend.allocateHost("gemm-check.host", 8L * M * N)) {
      upload(backend, stream, host, a, fa);
      upload(backend, stream, host, b, fb);
      backend.run(stream, new Convert(fa, ha));
      backend.run(stream, new Convert(fb, hb));
      for (int t = 0; t < 4; t++) {
        boolean ta = (t & 1) != 0;
        boolean tb = (t & 2) != 0;
        own.gemm(stream, product(fa, fb, c32, ta, tb));
        own.gemm(stream, product(ha, hb, c16, ta, tb));
        backend.copy(c32, host, 0, c32.bytes(), stream);
        backend.copy(c16, host, c32.bytes(), c16.bytes(), stream);
        stream.synchronize();
        FloatBuffer f = host.asByteBuffer().asFloatBuffer();
        for (int i = 0; i < M * N; i++) {
          if (Float.floatToRawIntBits(f.get(i)) != Float.floatToRawIntBits(f.get(M * N + i))) {
            throw new BackendException(
                String.format(
                    "cuda: ramtrain's bf16 GEMM kernel disagrees with its fp32 kernel on %s"
                        + " (transposes %b/%b, element %d: %s vs %s); the cuda backend cannot be"
                        + " trusted on this GPU: train with ramtrain.train.backend=cpu and report it",
                    device, ta, tb, i, f.get(M * N + i), f.get(i)));
          }
        }
      }
    }
  }

  /** C = op(A) op(B), A and B read as op(A), op(B) whichever way they are stored. */
  private static Gemm product(
      DeviceBuffer a, DeviceBuffer b, DeviceBuffer c, boolean ta, boolean tb) {
    return new Gemm(
        M,
        N,
        K,
        1f,
        new GemmOperand(a, ta ? M : K, 0, ta),
        new GemmOperand(b, tb ? K : N, 0, tb),
        0f,
        GemmOperand.of(c, N));
  }

  private static void upload(
      Backend backend, Stream stream, HostBuffer host, float[] values, DeviceBuffer into) {
    host.asByteBuffer().asFloatBuffer().put(values);
    backend.copy(host, 0, into, 4L * values.length, stream);
    stream.synchronize();
  }
}
