package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.DType;

/** GEMM by the backend's own tiled kernels (gemm.cu): needs nothing beyond the driver. */
final class KernelGemm implements GemmEngine {
  private static final int TILE = 64;
  private static final int THREADS = 16;

  private final CudaKernels kernels;

  KernelGemm(CudaKernels kernels) {
    this.kernels = kernels;
  }

  @Override
  public String describe() {
    return "ramtrain's own GEMM kernels (64x64 tiles, fp32 accumulation)";
  }

  @Override
  public void gemm(
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
      int ldc) {
    launch(
        kernelFor(a.dtype(), b.dtype()),
        stream,
        transA,
        transB,
        m,
        n,
        k,
        alpha,
        a,
        lda,
        0,
        b,
        ldb,
        0,
        beta,
        c,
        ldc,
        0,
        1);
  }

  @Override
  public void gemmStridedBatched(
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
      int count) {
    launch(
        kernelFor(a.dtype(), b.dtype()),
        stream,
        transA,
        transB,
        m,
        n,
        k,
        alpha,
        a,
        lda,
        strideA,
        b,
        ldb,
        strideB,
        beta,
        c,
        ldc,
        strideC,
        count);
  }

  private static Kernel kernelFor(DType a, DType b) {
    boolean halfA = a == DType.BF16;
    boolean halfB = b == DType.BF16;
    if (halfA) {
      return halfB ? Kernel.GEMM_BF16_BF16 : Kernel.GEMM_BF16_F32;
    }
    return halfB ? Kernel.GEMM_F32_BF16 : Kernel.GEMM_F32_F32;
  }

  private void launch(
      Kernel kernel,
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
      int count) {
    if (m == 0 || n == 0 || count == 0) {
      return;
    }
    boolean summed = strideC == 0 && count > 1;
    KernelArgs args =
        new KernelArgs()
            .i32(transA)
            .i32(transB)
            .i32(m)
            .i32(n)
            .i32(k)
            .f32(alpha)
            .buffer(a)
            .i32(lda)
            .i64(strideA)
            .buffer(b)
            .i32(ldb)
            .i64(strideB)
            .f32(beta)
            .buffer(c)
            .i32(ldc)
            .i64(strideC)
            .i32(count);
    kernels.launch(
        kernel,
        stream,
        (n + TILE - 1) / TILE,
        (m + TILE - 1) / TILE,
        summed ? 1 : count,
        THREADS,
        THREADS,
        args);
  }

  @Override
  public void close() {}
}
