package dev.ramtrain.trainer.backend.cuda;

import static org.bytedeco.cuda.global.cublas.CUBLAS_COMPUTE_32F;
import static org.bytedeco.cuda.global.cublas.CUBLAS_COMPUTE_32F_FAST_TF32;
import static org.bytedeco.cuda.global.cublas.CUBLAS_DEFAULT_MATH;
import static org.bytedeco.cuda.global.cublas.CUBLAS_GEMM_DEFAULT;
import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_N;
import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_T;
import static org.bytedeco.cuda.global.cublas.CUBLAS_STATUS_SUCCESS;
import static org.bytedeco.cuda.global.cublas.cublasCreate_v2;
import static org.bytedeco.cuda.global.cublas.cublasDestroy_v2;
import static org.bytedeco.cuda.global.cublas.cublasGemmEx;
import static org.bytedeco.cuda.global.cublas.cublasGemmStridedBatchedEx;
import static org.bytedeco.cuda.global.cublas.cublasSetMathMode;
import static org.bytedeco.cuda.global.cublas.cublasSetStream_v2;
import static org.bytedeco.cuda.global.cudart.CUDA_R_16BF;
import static org.bytedeco.cuda.global.cudart.CUDA_R_32F;

import dev.ramtrain.trainer.backend.BackendException;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.ops.Gemm;
import dev.ramtrain.trainer.backend.ops.GemmStridedBatched;
import java.util.IdentityHashMap;
import java.util.Map;
import org.bytedeco.cuda.cublas.cublasContext;
import org.bytedeco.javacpp.FloatPointer;
import org.slf4j.LoggerFactory;

/**
 * GEMM by cuBLAS (libcublas.so.13 through JavaCPP's preset). cuBLAS is column-major and ramtrain's
 * matrices row-major; a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so
 * every call passes B before A and n before m, each with its own transpose flag. Every product is
 * one cublasGemmEx or cublasGemmStridedBatchedEx: fp32 operands with fp32 compute (TF32 only where
 * {@code ramtrain.cuda.tf32=all}), bf16 operands with fp32 accumulation on the tensor cores; a bf16
 * × fp32 product, which cuBLAS does not take, runs on the own kernels.
 *
 * <p>One cuBLAS handle per stream: a handle keeps its workspace per stream, and one stream per
 * handle is cuBLAS's condition for run-to-run identical results, which the bit-for-bit promises
 * (offloaded == resident, resume) rest on.
 */
final class CublasGemm implements GemmEngine {
  private final CudaContext context;
  private final KernelGemm mixed;
  private final String version;
  private final int fp32Compute;
  private final Map<CudaStream, cublasContext> handles = new IdentityHashMap<>();
  // alpha and beta in host memory (cuBLAS's host pointer mode reads them during the call); two
  // allocations, as a position into one would count bytes where cuBLAS's signature says void*
  private final FloatPointer alpha = new FloatPointer(1);
  private final FloatPointer beta = new FloatPointer(1);

  /** {@code version} as loaded ({@link NvidiaLibraries#cublas}); {@code tf32} for fp32 operands. */
  CublasGemm(CudaContext context, KernelGemm mixed, String version, boolean tf32) {
    this.context = context;
    this.mixed = mixed;
    this.version = version;
    this.fp32Compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  }

  @Override
  public String describe() {
    return version
        + " (fp32 with TF32 "
        + (fp32Compute == CUBLAS_COMPUTE_32F ? "off" : "on")
        + ", bf16 with fp32 accumulation; bf16 x fp32 by ramtrain's kernels)";
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
    alpha.put(op.alpha());
    beta.put(op.beta());
    check(
        cublasGemmEx(
            handle(stream),
            op(op.transB()),
            op(op.transA()),
            op.n(),
            op.m(),
            op.k(),
            alpha,
            b.address(),
            type(b.dtype()),
            op.ldb(),
            a.address(),
            type(a.dtype()),
            op.lda(),
            beta,
            c.address(),
            CUDA_R_32F,
            op.ldc(),
            compute(a.dtype()),
            CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx",
        op.m(),
        op.n(),
        op.k(),
        stream);
  }

  @Override
  public synchronized void gemmStridedBatched(CudaStream stream, GemmStridedBatched op) {
    if (op.m() == 0 || op.n() == 0) {
      return;
    }
    if (op.a().dtype() != op.b().dtype()) {
      mixed.gemmStridedBatched(stream, op);
      return;
    }
    CudaBuffer a = (CudaBuffer) op.a();
    CudaBuffer b = (CudaBuffer) op.b();
    CudaBuffer c = (CudaBuffer) op.c();
    if (op.sumsIntoOneC() && op.count() > 1) {
      // cuBLAS's batches may run concurrently: items summing into one C go one after another.
      int bytes = a.dtype().bytes();
      for (int i = 0; i < op.count(); i++) {
        alpha.put(op.alpha());
        beta.put(i == 0 ? op.beta() : 1f);
        check(
            cublasGemmEx(
                handle(stream),
                op(op.transB()),
                op(op.transA()),
                op.n(),
                op.m(),
                op.k(),
                alpha,
                b.address().plus((long) bytes * i * op.strideB()),
                type(b.dtype()),
                op.ldb(),
                a.address().plus((long) bytes * i * op.strideA()),
                type(a.dtype()),
                op.lda(),
                beta,
                c.address(),
                CUDA_R_32F,
                op.ldc(),
                compute(a.dtype()),
                CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (summed batch item " + i + ")",
            op.m(),
            op.n(),
            op.k(),
            stream);
      }
      return;
    }
    alpha.put(op.alpha());
    beta.put(op.beta());
    check(
        cublasGemmStridedBatchedEx(
            handle(stream),
            op(op.transB()),
            op(op.transA()),
            op.n(),
            op.m(),
            op.k(),
            alpha,
            b.address(),
            type(b.dtype()),
            op.ldb(),
            op.strideB(),
            a.address(),
            type(a.dtype()),
            op.lda(),
            op.strideA(),
            beta,
            c.address(),
            CUDA_R_32F,
            op.ldc(),
            op.strideC(),
            op.count(),
            compute(a.dtype()),
            CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx x" + op.count(),
        op.m(),
        op.n(),
        op.k(),
        stream);
  }

  /** The stream's handle, made on its first GEMM, with the context current on this thread. */
  private cublasContext handle(CudaStream stream) {
    context.bind();
    cublasContext handle = handles.get(stream);
    if (handle == null) {
      handle = new cublasContext();
      check(
          cublasCreate_v2(handle), "creating a cuBLAS handle for stream '" + stream.label() + "'");
      handles.put(stream, handle);
      check(cublasSetStream_v2(handle, stream.library()), "setting cuBLAS's stream");
      check(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "setting cuBLAS's math mode");
    }
    return handle;
  }

  private int compute(DType operands) {
    return operands == DType.BF16 ? CUBLAS_COMPUTE_32F : fp32Compute;
  }

  private static int op(boolean transpose) {
    return transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  }

  private static int type(DType dtype) {
    return dtype == DType.BF16 ? CUDA_R_16BF : CUDA_R_32F;
  }

  private static void check(int status, String call, int m, int n, int k, CudaStream stream) {
    if (status != CUBLAS_STATUS_SUCCESS) {
      check(
          status, String.format("%s m=%d n=%d k=%d on stream '%s'", call, m, n, k, stream.label()));
    }
  }

  private static void check(int status, String what) {
    if (status != CUBLAS_STATUS_SUCCESS) {
      throw new BackendException("cuda: " + what + " failed: " + statusName(status));
    }
  }

  /** cublasStatus_t's names (cublasGetStatusName would be one more function to bind and stub). */
  static String statusName(int status) {
    return switch (status) {
      case 1 -> "CUBLAS_STATUS_NOT_INITIALIZED";
      case 3 -> "CUBLAS_STATUS_ALLOC_FAILED";
      case 7 -> "CUBLAS_STATUS_INVALID_VALUE";
      case 8 -> "CUBLAS_STATUS_ARCH_MISMATCH";
      case 11 -> "CUBLAS_STATUS_MAPPING_ERROR";
      case 13 -> "CUBLAS_STATUS_EXECUTION_FAILED";
      case 14 -> "CUBLAS_STATUS_INTERNAL_ERROR";
      case 15 -> "CUBLAS_STATUS_NOT_SUPPORTED";
      default -> "cuBLAS status " + status;
    };
  }

  @Override
  public synchronized void close() {
    context.bind();
    for (cublasContext handle : handles.values()) {
      int status = cublasDestroy_v2(handle);
      if (status != CUBLAS_STATUS_SUCCESS) {
        LoggerFactory.getLogger(CublasGemm.class)
            .warn("cuda: destroying a cuBLAS handle reported {}", statusName(status));
      }
    }
    handles.clear();
    alpha.close();
    beta.close();
  }
}
