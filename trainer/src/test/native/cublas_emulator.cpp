// The cuBLAS calls the CUDA backend makes, as libcublas.so.13 over OpenBLAS, for the emulated
// device (cuda_emulator.cpp): device pointers are host pointers there, and each GEMM is enqueued
// on the handle's stream like any other device work. Column-major, as cuBLAS is. The exports are
// exactly the functions the backend binds (EmulatorStubsTest compares the two lists): a function
// the engine calls and the stub lacks would kill the JVM at its first call. TF32 compute is
// rounds fp32 operands to TF32 (tf32.h), as the tensor cores read them.
#include <cblas.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "emulator_streams.h"
#include "tf32.h"

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

// MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL: the cuBLAS of CUDA 13.1.
EXPORT cublasStatus_t cublasGetProperty(int type, int* value) {
  static const int version[] = {13, 1, 0};
  if (type < 0 || type > 2) return CUBLAS_STATUS_INVALID_VALUE;
  *value = version[type];
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

// As cuBLAS: both inputs of one type (fp32 or bf16), an fp32 output, fp32 compute (TF32 allowed).
static bool supported(const char* call, int a_type, int b_type, int c_type, int compute) {
  bool types_ok = a_type == b_type && (a_type == CUDA_R_32F || a_type == CUDA_R_16BF) &&
                  c_type == CUDA_R_32F;
  bool compute_ok = compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  if (!types_ok || !compute_ok) {
    std::fprintf(stderr, "cublas emulator: %s types %d x %d -> %d, compute %d\n", call, a_type,
                 b_type, c_type, compute);
  }
  return types_ok && compute_ok;
}

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t handle, int ta, int tb, int m, int n, int k,
                                   const void* alpha, const void* a, int a_type, int lda,
                                   const void* b, int b_type, int ldb, const void* beta, void* c,
                                   int c_type, int ldc, int compute, int algo) {
  (void)algo;
  if (!supported("cublasGemmEx", a_type, b_type, c_type, compute)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  float* out = static_cast<float*>(c);
  return enqueue(handle, [=] {
    std::vector<float> wide_a, wide_b;
    const float* fa = as_floats(a, a_type, span(ta, m, k, lda), wide_a);
    const float* fb = as_floats(b, b_type, span(tb, k, n, ldb), wide_b);
    if (compute == CUBLAS_COMPUTE_32F_FAST_TF32) {
      fa = emu::tf32_copy(fa, span(ta, m, k, lda), wide_a);
      fb = emu::tf32_copy(fb, span(tb, k, n, ldb), wide_b);
    }
    cblas_sgemm(CblasColMajor, op(ta), op(tb), m, n, k, al, fa, lda, fb, ldb, be, out, ldc);
  });
}

EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, int ta, int tb, int m,
                                                 int n, int k, const void* alpha, const void* a,
                                                 int a_type, int lda, long long stride_a,
                                                 const void* b, int b_type, int ldb,
                                                 long long stride_b, const void* beta, void* c,
                                                 int c_type, int ldc, long long stride_c,
                                                 int count, int compute, int algo) {
  (void)algo;
  if (!supported("cublasGemmStridedBatchedEx", a_type, b_type, c_type, compute)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  int a_size = a_type == CUDA_R_32F ? 4 : 2, b_size = b_type == CUDA_R_32F ? 4 : 2;
  const char* ab = static_cast<const char*>(a);
  const char* bb = static_cast<const char*>(b);
  float* out = static_cast<float*>(c);
  return enqueue(handle, [=] {
    std::vector<float> wide_a, wide_b;
    for (int i = 0; i < count; i++) {
      const float* fa = as_floats(ab + i * stride_a * a_size, a_type, span(ta, m, k, lda), wide_a);
      const float* fb = as_floats(bb + i * stride_b * b_size, b_type, span(tb, k, n, ldb), wide_b);
      if (compute == CUBLAS_COMPUTE_32F_FAST_TF32) {
        fa = emu::tf32_copy(fa, span(ta, m, k, lda), wide_a);
        fb = emu::tf32_copy(fb, span(tb, k, n, ldb), wide_b);
      }
      cblas_sgemm(CblasColMajor, op(ta), op(tb), m, n, k, al, fa, lda, fb, ldb, be,
                  out + i * stride_c, ldc);
    }
  });
}
