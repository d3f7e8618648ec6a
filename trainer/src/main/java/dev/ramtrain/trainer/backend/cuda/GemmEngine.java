package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;

/**
 * Who multiplies matrices on the device: cuBLAS when its library loads, else the backend's own
 * kernels (ramtrain.cuda.gemm). The operations are already checked and their buffers open; matrices
 * are row-major, as {@link Gemm} defines them.
 */
interface GemmEngine extends AutoCloseable {
  /** What runs, for the startup log. */
  String describe();

  void gemm(CudaStream stream, Gemm op);

  /** A batch whose C stride is 0 sums every item's product into the one C. */
  void gemmStridedBatched(CudaStream stream, GemmStridedBatched op);

  @Override
  void close();
}
