// The cuBLAS calls the CUDA backend makes, as libcublas.so.12 over OpenBLAS, for the emulated
// device (cuda_emulator.cpp): device pointers are host pointers there, and each GEMM is enqueued
// on the handle's stream like any other device work. Column-major, as cuBLAS is.
#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "emulator_streams.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

typedef int cublasStatus_t;
enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };

struct Handle {
  emu::Stream* stream = nullptr;
  int math_mode = 0;
};
typedef Handle* cublasHandle_t;

static CBLAS_TRANSPOSE op(int o) { return o == 0 ? CblasNoTrans : CblasTrans; }

// One operand as fp32: bf16 widened exactly (the top half of a float), fp32 used in place.
static const float* as_floats(const void* data, int type, long long count,
                              std::vector<float>& scratch) {
  if (type == CUDA_R_32F) return static_cast<const float*>(data);
  const unsigned short* half = static_cast<const unsigned short*>(data);
  scratch.resize(count);
  for (long long i = 0; i < count; i++) {
    unsigned int bits = static_cast<unsigned int>(half[i]) << 16;
    std::memcpy(&scratch[i], &bits, sizeof(float));
  }
  return scratch.data();
}

// Elements a column-major operand spans: op(X) is rows x cols, stored with leading dimension ld.
static long long span(int o, int rows, int cols, int ld) {
  return o == 0 ? (long long)ld * (cols - 1) + rows : (long long)ld * (rows - 1) + cols;
}

static cublasStatus_t enqueue(cublasHandle_t handle, std::function<void()> work) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (emu::context_error() != 0) return CUBLAS_STATUS_EXECUTION_FAILED;
  emu::enqueue_work(handle->stream, std::move(work));
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (emu::context_error() != 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new Handle();
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGetVersion_v2(cublasHandle_t, int* version) {
  *version = 120602;  // the cuBLAS JCuda 12.6.0 was built against
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, emu::Stream* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t handle, int mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGetMathMode(cublasHandle_t handle, int* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

// Scalars (alpha, beta) are read from host memory: the only pointer mode the emulator offers.
EXPORT cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, int* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *mode = 0;  // CUBLAS_POINTER_MODE_HOST
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, int mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  return mode == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, int ta, int tb, int m, int n, int k,
                                     const float* alpha, const float* a, int lda, const float* b,
                                     int ldb, const float* beta, float* c, int ldc) {
  float al = *alpha, be = *beta;  // host pointer mode: read now
  return enqueue(handle, [=] {
    cblas_sgemm(CblasColMajor, op(ta), op(tb), m, n, k, al, a, lda, b, ldb, be, c, ldc);
  });
}

EXPORT cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, int ta, int tb, int m,
                                                int n, int k, const float* alpha, const float* a,
                                                int lda, long long stride_a, const float* b,
                                                int ldb, long long stride_b, const float* beta,
                                                float* c, int ldc, long long stride_c,
                                                int count) {
  float al = *alpha, be = *beta;
  return enqueue(handle, [=] {
    for (int i = 0; i < count; i++) {
      cblas_sgemm(CblasColMajor, op(ta), op(tb), m, n, k, al, a + i * stride_a, lda,
                  b + i * stride_b, ldb, be, c + i * stride_c, ldc);
    }
  });
}

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t handle, int ta, int tb, int m, int n, int k,
                                   const void* alpha, const void* a, int a_type, int lda,
                                   const void* b, int b_type, int ldb, const void* beta, void* c,
                                   int c_type, int ldc, int compute, int algo) {
  (void)algo;
  // As cuBLAS: both inputs of one type (fp32 or bf16), an fp32 output.
  bool types_ok = a_type == b_type && (a_type == CUDA_R_32F || a_type == CUDA_R_16BF) &&
                  c_type == CUDA_R_32F;
  if (!types_ok || (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32)) {
    std::fprintf(stderr, "cublas emulator: cublasGemmEx types %d x %d -> %d, compute %d\n",
                 a_type, b_type, c_type, compute);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  float* out = static_cast<float*>(c);
  return enqueue(handle, [=] {
    std::vector<float> wide_a, wide_b;
    const float* fa = as_floats(a, a_type, span(ta, m, k, lda), wide_a);
    const float* fb = as_floats(b, b_type, span(tb, k, n, ldb), wide_b);
    cblas_sgemm(CblasColMajor, op(ta), op(tb), m, n, k, al, fa, lda, fb, ldb, be, out, ldc);
  });
}
