package dev.ramtrain.trainer.backend.cpu;

import dev.ramtrain.trainer.backend.ops.StridedCopy;
import java.nio.FloatBuffer;

/**
 * Strided copies on the CPU: split over the repeats and j, each (r, j, k) walking i in order as the
 * CUDA kernel.
 */
final class CopyKernels {
  private static final int GRAIN = 1 << 14;

  private final Parallel parallel;

  CopyKernels(Parallel parallel) {
    this.parallel = parallel;
  }

  void stridedCopy(FloatBuffer src, FloatBuffer dst, StridedCopy op) {
    StridedCopy.Strides s = op.srcStrides();
    StridedCopy.Strides d = op.dstStrides();
    StridedCopy.Repeat repeat = op.repeat();
    int n0 = op.n0();
    int n1 = op.n1();
    int n2 = op.n2();
    boolean rows = s.s2() == 1 && d.s2() == 1 && !op.accumulate(); // k walks contiguous rows
    parallel.forRange(
        repeat.times() * n1,
        Math.max(1, GRAIN / Math.max(1, n0 * n2)),
        (from, to) -> {
          float[] row = new float[rows ? n2 : 0];
          for (int rj = from; rj < to; rj++) {
            long src0 = (rj / n1) * repeat.srcStep() + (rj % n1) * s.s1();
            long dst0 = (rj / n1) * repeat.dstStep() + (rj % n1) * d.s1();
            // i outside k: each (j, k) still sees i in increasing order
            for (int i = 0; i < n0; i++) {
              long srcI = src0 + i * s.s0();
              long dstI = dst0 + i * d.s0();
              if (rows) {
                src.get((int) srcI, row);
                dst.put((int) dstI, row);
                continue;
              }
              for (int k = 0; k < n2; k++) {
                int at = (int) (dstI + k * d.s2());
                float v = src.get((int) (srcI + k * s.s2()));
                dst.put(at, op.accumulate() ? dst.get(at) + v : v);
              }
            }
          }
        });
  }
}
