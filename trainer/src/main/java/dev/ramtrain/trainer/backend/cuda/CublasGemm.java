package dev.ramtrain.trainer.backend.cuda;

import static jcuda.jcublas.JCublas2.cublasCreate;
import static jcuda.jcublas.JCublas2.cublasDestroy;
import static jcuda.jcublas.JCublas2.cublasGemmEx;
import static jcuda.jcublas.JCublas2.cublasSetMathMode;
import static jcuda.jcublas.JCublas2.cublasSetStream;
import static jcuda.jcublas.JCublas2.cublasSgemm;
import static jcuda.jcublas.JCublas2.cublasSgemmStridedBatched;

import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import jcuda.Pointer;
import jcuda.cudaDataType;
import jcuda.jcublas.cublasGemmAlgo;
import jcuda.jcublas.cublasHandle;
import jcuda.jcublas.cublasMath;
import jcuda.jcublas.cublasOperation;
import jcuda.jcublas.cublasStatus;
import jcuda.runtime.cudaStream_t;
import org.slf4j.LoggerFactory;

/**
 * GEMM by cuBLAS (libcublas.so.12 through JCublas2). cuBLAS is column-major and ramtrain's matrices
 * row-major; a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so every call
 * passes B before A and n before m, each with its own transpose flag. bf16 operands go through
 * cublasGemmEx with fp32 compute (tensor cores on sm_80+).
 */
final class CublasGemm implements GemmEngine {
  private final CudaContext context;
  private final cublasHandle handle = new cublasHandle();
  private final KernelGemm mixed;

  /** Throws {@link LinkageError} when libcublas.so.12 does not load. */
  CublasGemm(CudaContext context, KernelGemm mixed) {
    this.context = context;
    this.mixed = mixed;
    context.bind();
    check(cublasCreate(handle), "creating a cuBLAS handle");
    check(cublasSetMathMode(handle, cublasMath.CUBLAS_DEFAULT_MATH), "setting cuBLAS's math mode");
  }

  @Override
  public String describe() {
    return "cuBLAS (libcublas.so.12; mixed bf16 x fp32 by ramtrain's kernels)";
  }

  @Override
  public synchronized void gemm(CudaStream stream, Gemm op) {
    if (op.m() == 0 || op.n() == 0) {
      return;
    }
    if (op.a().dtype() != op.b().dtype()) {
      mixed.gemm(stream, op);
      return;
    }
    CudaBuffer a = (CudaBuffer) op.a();
    CudaBuffer b = (CudaBuffer) op.b();
    CudaBuffer c = (CudaBuffer) op.c();
    on(stream);
    if (a.dtype() == DType.F32) {
      check(
          cublasSgemm(
              handle,
              op(op.transB()),
              op(op.transA()),
              op.n(),
              op.m(),
              op.k(),
              Pointer.to(new float[] {op.alpha()}),
              b.pointer(),
              op.ldb(),
              a.pointer(),
              op.lda(),
              Pointer.to(new float[] {op.beta()}),
              c.pointer(),
              op.ldc()),
          shape("cublasSgemm", op.m(), op.n(), op.k(), stream));
      return;
    }
    check(
        cublasGemmEx(
            handle,
            op(op.transB()),
            op(op.transA()),
            op.n(),
            op.m(),
            op.k(),
            Pointer.to(new float[] {op.alpha()}),
            b.pointer(),
            type(b.dtype()),
            op.ldb(),
            a.pointer(),
            type(a.dtype()),
            op.lda(),
            Pointer.to(new float[] {op.beta()}),
            c.pointer(),
            cudaDataType.CUDA_R_32F,
            op.ldc(),
            // JCublas2 takes the compute type as the older cudaDataType and maps it to
            // CUBLAS_COMPUTE_32F itself.
            cudaDataType.CUDA_R_32F,
            cublasGemmAlgo.CUBLAS_GEMM_DEFAULT),
        shape("cublasGemmEx (bf16)", op.m(), op.n(), op.k(), stream));
  }

  @Override
  public synchronized void gemmStridedBatched(CudaStream stream, GemmStridedBatched op) {
    if (op.m() == 0 || op.n() == 0) {
      return;
    }
    if (op.a().dtype() != DType.F32 || op.b().dtype() != DType.F32) { // bf16: the own kernels
      mixed.gemmStridedBatched(stream, op);
      return;
    }
    CudaBuffer a = (CudaBuffer) op.a();
    CudaBuffer b = (CudaBuffer) op.b();
    CudaBuffer c = (CudaBuffer) op.c();
    on(stream);
    if (op.sumsIntoOneC() && op.count() > 1) {
      // cuBLAS's batches may run concurrently: items summing into one C go one after another.
      for (int i = 0; i < op.count(); i++) {
        check(
            cublasSgemm(
                handle,
                op(op.transB()),
                op(op.transA()),
                op.n(),
                op.m(),
                op.k(),
                Pointer.to(new float[] {op.alpha()}),
                b.pointer().withByteOffset(4L * i * op.strideB()),
                op.ldb(),
                a.pointer().withByteOffset(4L * i * op.strideA()),
                op.lda(),
                Pointer.to(new float[] {i == 0 ? op.beta() : 1f}),
                c.pointer(),
                op.ldc()),
            shape("cublasSgemm (summed batch item " + i + ")", op.m(), op.n(), op.k(), stream));
      }
      return;
    }
    check(
        cublasSgemmStridedBatched(
            handle,
            op(op.transB()),
            op(op.transA()),
            op.n(),
            op.m(),
            op.k(),
            Pointer.to(new float[] {op.alpha()}),
            b.pointer(),
            op.ldb(),
            op.strideB(),
            a.pointer(),
            op.lda(),
            op.strideA(),
            Pointer.to(new float[] {op.beta()}),
            c.pointer(),
            op.ldc(),
            op.strideC(),
            op.count()),
        shape("cublasSgemmStridedBatched x" + op.count(), op.m(), op.n(), op.k(), stream));
  }

  private void on(CudaStream stream) {
    context.bind();
    check(cublasSetStream(handle, new cudaStream_t(stream.handle())), "setting cuBLAS's stream");
  }

  private static int op(boolean transpose) {
    return transpose ? cublasOperation.CUBLAS_OP_T : cublasOperation.CUBLAS_OP_N;
  }

  private static int type(DType dtype) {
    return dtype == DType.BF16 ? cudaDataType.CUDA_R_16BF : cudaDataType.CUDA_R_32F;
  }

  private static String shape(String call, int m, int n, int k, CudaStream stream) {
    return String.format("%s m=%d n=%d k=%d on stream '%s'", call, m, n, k, stream.label());
  }

  private static void check(int status, String what) {
    if (status != cublasStatus.CUBLAS_STATUS_SUCCESS) {
      throw new BackendException("cuda: " + what + " failed: " + cublasStatus.stringFor(status));
    }
  }

  @Override
  public void close() {
    context.bind();
    int status = cublasDestroy(handle);
    if (status != cublasStatus.CUBLAS_STATUS_SUCCESS) {
      LoggerFactory.getLogger(CublasGemm.class)
          .warn("cuda: destroying the cuBLAS handle reported {}", cublasStatus.stringFor(status));
    }
  }
}
