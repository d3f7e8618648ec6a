package dev.ramtrain.trainer.backend.cuda;

/**
 * Who multiplies matrices on the device: cuBLAS when its library loads, else the backend's own
 * kernels (ramtrain.cuda.gemm). Arguments are already checked; matrices are row-major, as {@link
 * dev.ramtrain.trainer.backend.Backend#gemm} defines them.
 */
interface GemmEngine extends AutoCloseable {
  /** What runs, for the startup log. */
  String describe();

  void gemm(
      CudaStream stream,
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      CudaBuffer a,
      int lda,
      CudaBuffer b,
      int ldb,
      float beta,
      CudaBuffer c,
      int ldc);

  /** {@code strideC == 0} sums every item's product into the one C. */
  void gemmStridedBatched(
      CudaStream stream,
      boolean transA,
      boolean transB,
      int m,
      int n,
      int k,
      float alpha,
      CudaBuffer a,
      int lda,
      long strideA,
      CudaBuffer b,
      int ldb,
      long strideB,
      float beta,
      CudaBuffer c,
      int ldc,
      long strideC,
      int count);

  @Override
  void close();
}
