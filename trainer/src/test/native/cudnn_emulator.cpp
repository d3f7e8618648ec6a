// The cuDNN 9 calls the CUDA backend makes, for the emulated device (cuda_emulator.cpp): the
// legacy convolution API over NCHW fp32 tensors, each convolution enqueued on the handle's stream
// as im2col and OpenBLAS GEMMs. cuDNN 9 splits its functions over four libraries whose symbols
// carry their library's version node (cudnnCreate@libcudnn_graph.so.9, cudnnConvolutionForward@
// libcudnn_cnn.so.9, ...); build.sh builds this one source four times, each exporting its
// library's part (cudnn_*.map), so that the JNI wrapper binds every function where it expects it.
// Descriptors are plain structs shared by all four, as the real libraries share theirs.
//
// The algorithm queries rank three algorithms, so that the engine's choice is tested: first one
// whose workspace (twice the batch's columns) exceeds what the engine offers, which fails if run;
// then, for the filter gradient, a non-deterministic one (as cuDNN's ALGO_0 is), which writes NaN
// here (the emulator has no scheduling noise to show, so picking it fails every gradient test);
// then one that keeps one image's columns in the workspace it is given (so a wrong workspace
// pointer or size corrupts results) and, for the forward and data gradient, one without workspace.
#include <cblas.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "emulator_streams.h"
#include "tf32.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

typedef int cudnnStatus_t;
enum {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_NOT_INITIALIZED = 1001,
  CUDNN_STATUS_BAD_PARAM = 2000,
  CUDNN_STATUS_NOT_SUPPORTED = 3000,
  CUDNN_STATUS_EXECUTION_FAILED = 5000,
};
enum { CUDNN_DATA_FLOAT = 0, CUDNN_TENSOR_NCHW = 0, CUDNN_CROSS_CORRELATION = 1 };
enum { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 };
enum { CUDNN_FMA_MATH = 3 };
enum { ALGO_WITHOUT_WORKSPACE = 0, ALGO_WITH_WORKSPACE = 1, ALGO_TOO_LARGE = 2 };

struct Handle {
  emu::Stream* stream = nullptr;
};
struct Tensor {
  int n = 0, c = 0, h = 0, w = 0, type = -1;
};
struct Filter {
  int k = 0, c = 0, r = 0, s = 0, type = -1;
};
struct Convolution {
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int mode = -1, type = -1, math = 0, groups = 1;
};

// cudnnConvolution*AlgoPerf_t: the same layout for all three directions.
struct AlgoPerf {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

// ---- cudnn_graph: handles, versions, errors ------------------------------------------------

EXPORT cudnnStatus_t cudnnCreate(Handle** handle) {
  if (emu::context_error() != 0) return CUDNN_STATUS_NOT_INITIALIZED;
  *handle = new Handle();
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnDestroy(Handle* handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT size_t cudnnGetVersion() { return 91900; }

EXPORT cudnnStatus_t cudnnSetStream(Handle* handle, emu::Stream* stream) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
  }
}

// ---- cudnn_ops: tensor and filter descriptors ------------------------------------------------

EXPORT cudnnStatus_t cudnnCreateTensorDescriptor(Tensor** d) {
  *d = new Tensor();
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnDestroyTensorDescriptor(Tensor* d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetTensor4dDescriptor(Tensor* d, int format, int type, int n, int c,
                                                int h, int w) {
  if (d == nullptr || n < 1 || c < 1 || h < 1 || w < 1) return CUDNN_STATUS_BAD_PARAM;
  if (format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
  *d = Tensor{n, c, h, w, type};
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnCreateFilterDescriptor(Filter** d) {
  *d = new Filter();
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnDestroyFilterDescriptor(Filter* d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetFilter4dDescriptor(Filter* d, int type, int format, int k, int c,
                                                int r, int s) {
  if (d == nullptr || k < 1 || c < 1 || r < 1 || s < 1) return CUDNN_STATUS_BAD_PARAM;
  if (format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
  *d = Filter{k, c, r, s, type};
  return CUDNN_STATUS_SUCCESS;
}

// ---- cudnn_cnn: convolutions -----------------------------------------------------------------

EXPORT cudnnStatus_t cudnnCreateConvolutionDescriptor(Convolution** d) {
  *d = new Convolution();
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnDestroyConvolutionDescriptor(Convolution* d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolution2dDescriptor(Convolution* d, int pad_h, int pad_w, int u,
                                                     int v, int dilation_h, int dilation_w,
                                                     int mode, int type) {
  if (d == nullptr || pad_h < 0 || pad_w < 0 || u < 1 || v < 1) return CUDNN_STATUS_BAD_PARAM;
  if (dilation_h != 1 || dilation_w != 1 || mode != CUDNN_CROSS_CORRELATION ||
      type != CUDNN_DATA_FLOAT) {
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  d->pad_h = pad_h;
  d->pad_w = pad_w;
  d->stride_h = u;
  d->stride_w = v;
  d->mode = mode;
  d->type = type;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnSetConvolutionMathType(Convolution* d, int math) {
  if (d == nullptr || math < 0 || math > 3) return CUDNN_STATUS_BAD_PARAM;
  d->math = math;  // all but CUDNN_FMA_MATH let fp32 operands round to TF32, as on sm_80+
  return CUDNN_STATUS_SUCCESS;
}

// The output of x under conv with filter w, or false when the three do not fit together.
static bool output_of(const Tensor* x, const Filter* w, const Convolution* conv, Tensor* y) {
  if (x == nullptr || w == nullptr || conv == nullptr || x->c != w->c) return false;
  int oh = (x->h + 2 * conv->pad_h - w->r) / conv->stride_h + 1;
  int ow = (x->w + 2 * conv->pad_w - w->s) / conv->stride_w + 1;
  if (oh < 1 || ow < 1) return false;
  *y = Tensor{x->n, w->k, oh, ow, x->type};
  return true;
}

static bool fits(const Tensor* x, const Filter* w, const Convolution* conv, const Tensor* y) {
  Tensor expected;
  return y != nullptr && output_of(x, w, conv, &expected) && expected.n == y->n &&
         expected.c == y->c && expected.h == y->h && expected.w == y->w;
}

// One image's columns, [c·r·s, oh·ow] floats: what ALGO_WITH_WORKSPACE keeps in the workspace.
static size_t columns_bytes(const Tensor* x, const Filter* w, const Tensor* y) {
  return sizeof(float) * (size_t)x->c * w->r * w->s * y->h * y->w;
}

static void im2col(const float* image, const Tensor& x, const Filter& w, const Convolution& conv,
                   const Tensor& y, float* cols) {
  size_t hw = (size_t)y.h * y.w;
  for (int c = 0; c < x.c; c++)
    for (int i = 0; i < w.r; i++)
      for (int j = 0; j < w.s; j++) {
        float* row = cols + (((size_t)c * w.r + i) * w.s + j) * hw;
        for (int oy = 0; oy < y.h; oy++) {
          int iy = oy * conv.stride_h - conv.pad_h + i;
          for (int ox = 0; ox < y.w; ox++) {
            int ix = ox * conv.stride_w - conv.pad_w + j;
            bool inside = iy >= 0 && iy < x.h && ix >= 0 && ix < x.w;
            row[(size_t)oy * y.w + ox] = inside ? image[((size_t)c * x.h + iy) * x.w + ix] : 0.0f;
          }
        }
      }
}

// Adds the columns' gradients back onto one image's gradient (scaled beforehand by the caller).
static void col2im(const float* cols, const Tensor& x, const Filter& w, const Convolution& conv,
                   const Tensor& y, float alpha, float* image) {
  size_t hw = (size_t)y.h * y.w;
  for (int c = 0; c < x.c; c++)
    for (int i = 0; i < w.r; i++)
      for (int j = 0; j < w.s; j++) {
        const float* row = cols + (((size_t)c * w.r + i) * w.s + j) * hw;
        for (int oy = 0; oy < y.h; oy++) {
          int iy = oy * conv.stride_h - conv.pad_h + i;
          if (iy < 0 || iy >= x.h) continue;
          for (int ox = 0; ox < y.w; ox++) {
            int ix = ox * conv.stride_w - conv.pad_w + j;
            if (ix < 0 || ix >= x.w) continue;
            image[((size_t)c * x.h + iy) * x.w + ix] += alpha * row[(size_t)oy * y.w + ox];
          }
        }
      }
}

// An fp32 operand as the convolution reads it: rounded to TF32 unless the descriptor asks for FMA
// math (sm_80 and newer round under every other math type).
static const float* operand(const Convolution& conv, const float* data, size_t count,
                            std::vector<float>& scratch) {
  return conv.math == CUDNN_FMA_MATH ? data : emu::tf32_copy(data, (long long)count, scratch);
}

// The columns buffer an algorithm works in: the caller's workspace, or memory of its own.
static float* columns_for(int algo, void* workspace, size_t workspace_bytes, size_t needed,
                          std::vector<float>& own) {
  if (algo == ALGO_WITH_WORKSPACE) {
    return workspace_bytes >= needed ? static_cast<float*>(workspace) : nullptr;
  }
  own.resize(needed / sizeof(float));
  return own.data();
}

static cudnnStatus_t enqueue(Handle* handle, std::function<void()> work) {
  if (handle == nullptr) return CUDNN_STATUS_NOT_INITIALIZED;
  if (emu::context_error() != 0) return CUDNN_STATUS_EXECUTION_FAILED;
  emu::enqueue_work(handle->stream, std::move(work));
  return CUDNN_STATUS_SUCCESS;
}

// Ranks ALGO_TOO_LARGE, then ALGO_WITH_WORKSPACE and ALGO_WITHOUT_WORKSPACE; for the filter
// gradient ALGO_WITHOUT_WORKSPACE is the non-deterministic one and ranks above the other.
static void rank(AlgoPerf* perf, int* returned, int requested, const Tensor* x, size_t columns,
                 bool filter) {
  AlgoPerf too_large = {ALGO_TOO_LARGE, CUDNN_STATUS_SUCCESS, 0.5f, 2 * columns * x->n,
                        CUDNN_DETERMINISTIC, 0, {0, 0, 0}};
  AlgoPerf with = {ALGO_WITH_WORKSPACE, CUDNN_STATUS_SUCCESS, 1.0f, columns, CUDNN_DETERMINISTIC,
                   0, {0, 0, 0}};
  AlgoPerf without = {ALGO_WITHOUT_WORKSPACE, CUDNN_STATUS_SUCCESS, 2.0f, 0,
                      filter ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC, 0, {0, 0, 0}};
  AlgoPerf ranked[3] = {too_large, filter ? without : with, filter ? with : without};
  int n = requested < 3 ? requested : 3;
  for (int i = 0; i < n; i++) perf[i] = ranked[i];
  *returned = n;
}

EXPORT cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(Handle* handle, const Tensor* x,
                                                            const Filter* w,
                                                            const Convolution* conv,
                                                            const Tensor* y, int requested,
                                                            int* returned, AlgoPerf* perf) {
  if (handle == nullptr || !fits(x, w, conv, y) || requested < 1) return CUDNN_STATUS_BAD_PARAM;
  rank(perf, returned, requested, x, columns_bytes(x, w, y), false);
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(Handle* handle, const Filter* w,
                                                                 const Tensor* dy,
                                                                 const Convolution* conv,
                                                                 const Tensor* dx, int requested,
                                                                 int* returned, AlgoPerf* perf) {
  if (handle == nullptr || !fits(dx, w, conv, dy) || requested < 1) return CUDNN_STATUS_BAD_PARAM;
  rank(perf, returned, requested, dx, columns_bytes(dx, w, dy), false);
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    Handle* handle, const Tensor* x, const Tensor* dy, const Convolution* conv, const Filter* dw,
    int requested, int* returned, AlgoPerf* perf) {
  if (handle == nullptr || !fits(x, dw, conv, dy) || requested < 1) return CUDNN_STATUS_BAD_PARAM;
  rank(perf, returned, requested, x, columns_bytes(x, dw, dy), true);
  return CUDNN_STATUS_SUCCESS;
}

static size_t workspace_of(int algo, const Tensor* x, const Filter* w, const Tensor* y) {
  if (algo == ALGO_TOO_LARGE) return 2 * columns_bytes(x, w, y) * x->n;
  return algo == ALGO_WITH_WORKSPACE ? columns_bytes(x, w, y) : 0;
}

EXPORT cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(Handle*, const Tensor* x,
                                                             const Filter* w,
                                                             const Convolution* conv,
                                                             const Tensor* y, int algo,
                                                             size_t* bytes) {
  if (!fits(x, w, conv, y) || algo < 0 || algo > 2) return CUDNN_STATUS_BAD_PARAM;
  *bytes = workspace_of(algo, x, w, y);
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(Handle*, const Filter* w,
                                                                  const Tensor* dy,
                                                                  const Convolution* conv,
                                                                  const Tensor* dx, int algo,
                                                                  size_t* bytes) {
  if (!fits(dx, w, conv, dy) || algo < 0 || algo > 2) return CUDNN_STATUS_BAD_PARAM;
  *bytes = workspace_of(algo, dx, w, dy);
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(Handle*, const Tensor* x,
                                                                    const Tensor* dy,
                                                                    const Convolution* conv,
                                                                    const Filter* dw, int algo,
                                                                    size_t* bytes) {
  if (!fits(x, dw, conv, dy) || algo < 0 || algo > 2) return CUDNN_STATUS_BAD_PARAM;
  *bytes = workspace_of(algo, x, dw, dy);
  return CUDNN_STATUS_SUCCESS;
}

// y = alpha · conv(x, w) + beta · y, image by image: y_i [k, oh·ow] = W [k, c·r·s] · cols_i.
EXPORT cudnnStatus_t cudnnConvolutionForward(Handle* handle, const float* alpha,
                                             const Tensor* xd, const float* x, const Filter* wd,
                                             const float* w, const Convolution* convd, int algo,
                                             void* workspace, size_t workspace_bytes,
                                             const float* beta, const Tensor* yd, float* y) {
  if (!fits(xd, wd, convd, yd) || algo < 0 || algo > 2) return CUDNN_STATUS_BAD_PARAM;
  size_t needed = columns_bytes(xd, wd, yd);
  if (workspace_bytes < workspace_of(algo, xd, wd, yd)) return CUDNN_STATUS_BAD_PARAM;
  float al = *alpha, be = *beta;
  Tensor xs = *xd, ys = *yd;
  Filter ws = *wd;
  Convolution conv = *convd;
  return enqueue(handle, [=] {
    std::vector<float> own, xr, wr;
    float* cols = columns_for(algo, workspace, workspace_bytes, needed, own);
    int patch = ws.c * ws.r * ws.s, hw = ys.h * ys.w;
    const float* xu = operand(conv, x, (size_t)xs.n * xs.c * xs.h * xs.w, xr);
    const float* wu = operand(conv, w, (size_t)ws.k * patch, wr);
    for (int i = 0; i < xs.n; i++) {
      im2col(xu + (size_t)i * xs.c * xs.h * xs.w, xs, ws, conv, ys, cols);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ws.k, hw, patch, al, wu, patch, cols,
                  hw, be, y + (size_t)i * ys.c * hw, hw);
    }
  });
}

// dx = alpha · convᵀ(dy, w) + beta · dx: cols_i = Wᵀ · dy_i, summed back by col2im.
EXPORT cudnnStatus_t cudnnConvolutionBackwardData(Handle* handle, const float* alpha,
                                                  const Filter* wd, const float* w,
                                                  const Tensor* dyd, const float* dy,
                                                  const Convolution* convd, int algo,
                                                  void* workspace, size_t workspace_bytes,
                                                  const float* beta, const Tensor* dxd,
                                                  float* dx) {
  if (!fits(dxd, wd, convd, dyd) || algo < 0 || algo > 2) return CUDNN_STATUS_BAD_PARAM;
  size_t needed = columns_bytes(dxd, wd, dyd);
  if (workspace_bytes < workspace_of(algo, dxd, wd, dyd)) return CUDNN_STATUS_BAD_PARAM;
  float al = *alpha, be = *beta;
  Tensor xs = *dxd, ys = *dyd;
  Filter ws = *wd;
  Convolution conv = *convd;
  return enqueue(handle, [=] {
    std::vector<float> own, dyr, wr;
    float* cols = columns_for(algo, workspace, workspace_bytes, needed, own);
    int patch = ws.c * ws.r * ws.s, hw = ys.h * ys.w;
    size_t image = (size_t)xs.c * xs.h * xs.w;
    const float* dyu = operand(conv, dy, (size_t)ys.n * ys.c * hw, dyr);
    const float* wu = operand(conv, w, (size_t)ws.k * patch, wr);
    for (int i = 0; i < xs.n; i++) {
      float* out = dx + (size_t)i * image;
      for (size_t e = 0; e < image; e++) out[e] = be == 0.0f ? 0.0f : be * out[e];
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch, hw, ws.k, 1.0f, wu, patch,
                  dyu + (size_t)i * ys.c * hw, hw, 0.0f, cols, hw);
      col2im(cols, xs, ws, conv, ys, al, out);
    }
  });
}

// dw = alpha · Σ_i dy_i · cols_iᵀ + beta · dw, the images summed in order.
EXPORT cudnnStatus_t cudnnConvolutionBackwardFilter(Handle* handle, const float* alpha,
                                                    const Tensor* xd, const float* x,
                                                    const Tensor* dyd, const float* dy,
                                                    const Convolution* convd, int algo,
                                                    void* workspace, size_t workspace_bytes,
                                                    const float* beta, const Filter* dwd,
                                                    float* dw) {
  if (!fits(xd, dwd, convd, dyd) || algo < 0 || algo > 2) return CUDNN_STATUS_BAD_PARAM;
  size_t needed = columns_bytes(xd, dwd, dyd);
  if (workspace_bytes < workspace_of(algo, xd, dwd, dyd)) return CUDNN_STATUS_BAD_PARAM;
  float al = *alpha, be = *beta;
  Tensor xs = *xd, ys = *dyd;
  Filter ws = *dwd;
  Convolution conv = *convd;
  return enqueue(handle, [=] {
    std::vector<float> own;
    float* cols = columns_for(algo, workspace, workspace_bytes, needed, own);
    int patch = ws.c * ws.r * ws.s, hw = ys.h * ys.w;
    if (algo == ALGO_WITHOUT_WORKSPACE) {  // the non-deterministic stand-in
      for (size_t e = 0; e < (size_t)ws.k * patch; e++) dw[e] = std::nanf("");
      return;
    }
    std::vector<float> xr, dyr;
    const float* xu = operand(conv, x, (size_t)xs.n * xs.c * xs.h * xs.w, xr);
    const float* dyu = operand(conv, dy, (size_t)ys.n * ys.c * hw, dyr);
    for (int i = 0; i < xs.n; i++) {
      im2col(xu + (size_t)i * xs.c * xs.h * xs.w, xs, ws, conv, ys, cols);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ws.k, patch, hw, al,
                  dyu + (size_t)i * ys.c * hw, hw, cols, hw, i == 0 ? be : 1.0f, dw, patch);
    }
  });
}

// ---- cudnn_adv: nothing the engine calls; its version node must exist for the wrapper to load --

EXPORT cudnnStatus_t cudnnAdvVersionCheck() { return CUDNN_STATUS_SUCCESS; }
