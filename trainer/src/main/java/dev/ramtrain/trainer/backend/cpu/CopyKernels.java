package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.ops.StridedCopy;
import java.nio.FloatBuffer;

/** Strided copies on the CPU: split over j, each (j, k) walking i in order as the CUDA kernel. */
final class CopyKernels {
  private static final int GRAIN = 1 << 14;

  private final Parallel parallel;

  CopyKernels(Parallel parallel) {
    this.parallel = parallel;
  }

  void stridedCopy(FloatBuffer src, FloatBuffer dst, StridedCopy op) {
    StridedCopy.Strides s = op.srcStrides();
    StridedCopy.Strides d = op.dstStrides();
    int n0 = op.n0();
    int n2 = op.n2();
    parallel.forRange(
        op.n1(),
        Math.max(1, GRAIN / Math.max(1, n0 * n2)),
        (from, to) -> {
          for (int j = from; j < to; j++) {
            for (int k = 0; k < n2; k++) {
              long from0 = j * s.s1() + k * s.s2();
              long to0 = j * d.s1() + k * d.s2();
              for (int i = 0; i < n0; i++) {
                int at = (int) (to0 + i * d.s0());
                float v = src.get((int) (from0 + i * s.s0()));
                dst.put(at, op.accumulate() ? dst.get(at) + v : v);
              }
            }
          }
        });
  }
}
