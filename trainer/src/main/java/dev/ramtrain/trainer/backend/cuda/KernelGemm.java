package dev.ramtrain.trainer.backend.cuda;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;

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
  public void gemm(CudaStream stream, Gemm op) {
    gemmStridedBatched(stream, GemmStridedBatched.of(op));
  }

  @Override
  public void gemmStridedBatched(CudaStream stream, GemmStridedBatched op) {
    if (op.m() == 0 || op.n() == 0) {
      return;
    }
    boolean summed = op.sumsIntoOneC() && op.count() > 1;
    KernelArgs args =
        new KernelArgs()
            .i32(op.transA())
            .i32(op.transB())
            .i32(op.m())
            .i32(op.n())
            .i32(op.k())
            .f32(op.alpha())
            .buffer((CudaBuffer) op.a())
            .i32(op.lda())
            .i64(op.strideA())
            .buffer((CudaBuffer) op.b())
            .i32(op.ldb())
            .i64(op.strideB())
            .f32(op.beta())
            .buffer((CudaBuffer) op.c())
            .i32(op.ldc())
            .i64(op.strideC())
            .i32(op.count());
    kernels.launch(
        kernelFor(op.a().dtype(), op.b().dtype()),
        stream,
        (op.n() + TILE - 1) / TILE,
        (op.m() + TILE - 1) / TILE,
        summed ? 1 : op.count(),
        THREADS,
        THREADS,
        args);
  }

  private static Kernel kernelFor(DType a, DType b) {
    boolean halfA = a == DType.BF16;
    boolean halfB = b == DType.BF16;
    if (halfA) {
      return halfB ? Kernel.GEMM_BF16_BF16 : Kernel.GEMM_BF16_F32;
    }
    return halfB ? Kernel.GEMM_F32_BF16 : Kernel.GEMM_F32_F32;
  }

  @Override
  public void close() {}
}
