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
#include <map>
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

// ---- cudnn_graph: the graph ("backend") API, for single convolutions ---------------------------
//
// Descriptors hold their attributes as bytes; finalizing checks what the engine's convolutions
// need. The heuristics rank four engines, so that the engine's filter is tested: one whose
// workspace (twice the batch's columns) exceeds what is offered, a non-deterministic one (which
// writes NaN if run), a tensor-core one (rounds fp32 operands to TF32: usable only where TF32 is
// allowed), and one that keeps one image's columns in the workspace it is given. Execution runs
// the legacy functions above.

enum {
  BK_CONVOLUTION = 1, BK_ENGINE = 2, BK_ENGINECFG = 3, BK_ENGINEHEUR = 4, BK_EXECUTION_PLAN = 5,
  BK_CONV_FORWARD = 10, BK_CONV_FILTER = 11, BK_CONV_DATA = 12, BK_OPERATIONGRAPH = 15,
  BK_VARIANT_PACK = 16, BK_TENSOR = 17
};
enum {
  T_HANDLE = 0, T_DATA_TYPE = 1, T_BOOLEAN = 2, T_INT64 = 3, T_FLOAT = 4, T_DOUBLE = 5,
  T_VOID_PTR = 6, T_CONVOLUTION_MODE = 7, T_HEUR_MODE = 8, T_NUMERICAL_NOTE = 11,
  T_BACKEND_DESCRIPTOR = 15
};
enum { NOTE_TENSOR_CORE = 0, NOTE_NONDETERMINISTIC = 4 };
enum { ENGINE_TOO_LARGE = 0, ENGINE_NONDETERMINISTIC = 1, ENGINE_TENSOR_CORE = 2, ENGINE_EXACT = 3 };
static const int ENGINES = 4;

struct Attribute {
  int type;
  std::vector<long long> values;  // every element widened to 64 bits (pointers, ints, floats' bits)
};
struct Graph;
struct Desc {
  int kind;
  bool finalized = false;
  std::map<int, Attribute> attributes;
  int engine = -1;           // engines and engine configurations
  Desc* graph = nullptr;     // what an engine, configuration or plan was made for
  size_t workspace = 0;      // plans
};

static size_t element_bytes(int type) {
  switch (type) {
    case T_DATA_TYPE: case T_CONVOLUTION_MODE: case T_HEUR_MODE: case T_NUMERICAL_NOTE:
    case T_FLOAT: return 4;
    case T_BOOLEAN: return 1;
    default: return 8;
  }
}

static const Attribute* attribute(const Desc* d, int name) {
  auto found = d->attributes.find(name);
  return found == d->attributes.end() ? nullptr : &found->second;
}

static long long value(const Desc* d, int name, size_t i = 0) {
  const Attribute* a = attribute(d, name);
  return a != nullptr && i < a->values.size() ? a->values[i] : 0;
}

static Desc* descriptor(const Desc* d, int name) {
  return reinterpret_cast<Desc*>(value(d, name));
}

EXPORT cudnnStatus_t cudnnBackendCreateDescriptor(int kind, Desc** out) {
  if (out == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *out = new Desc();
  (*out)->kind = kind;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnBackendDestroyDescriptor(Desc* d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnBackendSetAttribute(Desc* d, int name, int type, long long count,
                                              const void* elements) {
  if (d == nullptr || count < 0 || (count > 0 && elements == nullptr)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (d->finalized) return CUDNN_STATUS_BAD_PARAM;
  Attribute a{type, {}};
  size_t size = element_bytes(type);
  for (long long i = 0; i < count; i++) {
    long long v = 0;
    std::memcpy(&v, static_cast<const char*>(elements) + i * size, size);
    a.values.push_back(v);
  }
  d->attributes[name] = a;
  return CUDNN_STATUS_SUCCESS;
}

// A tensor's NCHW shape from a finalized descriptor: four packed dimensions of fp32.
static bool shape_of(const Desc* t, int dims[4]) {
  if (t == nullptr) return false;
  const Attribute* size = attribute(t, 902);
  const Attribute* strides = attribute(t, 903);
  if (t->kind != BK_TENSOR || size == nullptr || strides == nullptr ||
      size->values.size() != 4 || strides->values.size() != 4 || value(t, 901) != CUDNN_DATA_FLOAT) {
    return false;
  }
  long long packed = 1;
  for (int i = 3; i >= 0; i--) {
    if (strides->values[i] != packed || size->values[i] < 1) return false;
    dims[i] = (int)size->values[i];
    packed *= size->values[i];
  }
  return true;
}

// The legacy descriptors of a convolution operation: image, filter, output, convolution.
struct Legacy {
  Tensor image, output;
  Filter filter;
  Convolution conv;
  long long image_id, filter_id, output_id;
  float alpha, beta;
};

static bool legacy_of(const Desc* op, Legacy* out) {
  if (op == nullptr) return false;
  int base = op->kind == BK_CONV_FORWARD ? 700 : op->kind == BK_CONV_DATA ? 706 : 712;
  Desc* conv = descriptor(op, base + 2);
  Desc* filter = descriptor(op, base + 3);
  Desc* image = descriptor(op, base + 4);
  Desc* output = descriptor(op, base + 5);
  int x[4], w[4], y[4];
  if (conv == nullptr || !shape_of(image, x) || !shape_of(filter, w) || !shape_of(output, y)) {
    return false;
  }
  if (value(conv, 106) != 2 || value(conv, 101) != CUDNN_CROSS_CORRELATION ||
      value(conv, 100) != CUDNN_DATA_FLOAT || value(conv, 102, 0) != 1 || value(conv, 102, 1) != 1 ||
      value(conv, 105, 0) != value(conv, 104, 0) || value(conv, 105, 1) != value(conv, 104, 1)) {
    return false;
  }
  out->image = Tensor{x[0], x[1], x[2], x[3], CUDNN_DATA_FLOAT};
  out->filter = Filter{w[0], w[1], w[2], w[3], CUDNN_DATA_FLOAT};
  out->output = Tensor{y[0], y[1], y[2], y[3], CUDNN_DATA_FLOAT};
  out->conv = Convolution();
  out->conv.pad_h = (int)value(conv, 105, 0);
  out->conv.pad_w = (int)value(conv, 105, 1);
  out->conv.stride_h = (int)value(conv, 103, 0);
  out->conv.stride_w = (int)value(conv, 103, 1);
  out->conv.mode = CUDNN_CROSS_CORRELATION;
  out->conv.type = CUDNN_DATA_FLOAT;
  out->conv.math = CUDNN_FMA_MATH;
  out->image_id = value(image, 906);
  out->filter_id = value(filter, 906);
  out->output_id = value(output, 906);
  int alpha_bits = (int)value(op, base), beta_bits = (int)value(op, base + 1);
  std::memcpy(&out->alpha, &alpha_bits, 4);
  std::memcpy(&out->beta, &beta_bits, 4);
  return fits(&out->image, &out->filter, &out->conv, &out->output);
}

static const Desc* operation_of(const Desc* graph) {
  return graph == nullptr ? nullptr : descriptor(graph, 801);
}

EXPORT cudnnStatus_t cudnnBackendFinalize(Desc* d) {
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  Legacy legacy;
  int dims[4];
  switch (d->kind) {
    case BK_TENSOR:
      if (!shape_of(d, dims) || value(d, 906) == 0 || value(d, 900) < 4) {
        return CUDNN_STATUS_NOT_SUPPORTED;
      }
      break;
    case BK_CONV_FORWARD: case BK_CONV_DATA: case BK_CONV_FILTER:
      if (!legacy_of(d, &legacy)) return CUDNN_STATUS_NOT_SUPPORTED;
      break;
    case BK_OPERATIONGRAPH: {
      const Attribute* ops = attribute(d, 801);
      if (value(d, 800) == 0 || ops == nullptr || ops->values.size() != 1) {
        return CUDNN_STATUS_NOT_SUPPORTED;
      }
      break;
    }
    case BK_ENGINEHEUR:
      if (descriptor(d, 201) == nullptr || !descriptor(d, 201)->finalized) {
        return CUDNN_STATUS_BAD_PARAM;
      }
      break;
    case BK_EXECUTION_PLAN: {
      Desc* config = descriptor(d, 401);
      if (value(d, 400) == 0 || config == nullptr || config->engine < 0 ||
          !legacy_of(operation_of(config->graph), &legacy)) {
        return CUDNN_STATUS_BAD_PARAM;
      }
      d->engine = config->engine;
      d->graph = config->graph;
      size_t columns = columns_bytes(&legacy.image, &legacy.filter, &legacy.output);
      d->workspace = d->engine == ENGINE_TOO_LARGE ? 2 * columns * legacy.image.n : columns;
      break;
    }
    case BK_VARIANT_PACK:
      if (attribute(d, 1000) == nullptr || attribute(d, 1001) == nullptr ||
          attribute(d, 1000)->values.size() != attribute(d, 1001)->values.size()) {
        return CUDNN_STATUS_BAD_PARAM;
      }
      break;
    default:
      break;
  }
  d->finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

EXPORT cudnnStatus_t cudnnBackendGetAttribute(const Desc* d, int name, int type,
                                              long long requested, long long* count,
                                              void* elements) {
  if (d == nullptr || !d->finalized || count == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (d->kind == BK_ENGINEHEUR && name == 202) {  // results: the ranked configurations
    *count = requested == 0 ? ENGINES : (requested < ENGINES ? requested : ENGINES);
    for (long long i = 0; requested > 0 && i < *count; i++) {
      Desc* config = static_cast<Desc**>(elements)[i];
      config->engine = (int)i;
      config->graph = descriptor(d, 201);
      config->finalized = true;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (d->kind == BK_ENGINECFG && name == 300) {  // its engine
    Desc* engine = static_cast<Desc**>(elements)[0];
    engine->engine = d->engine;
    engine->graph = d->graph;
    engine->finalized = true;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  if (d->kind == BK_ENGINE && name == 1303 && type == T_NUMERICAL_NOTE) {
    int notes[1];
    int n = 0;
    if (d->engine == ENGINE_NONDETERMINISTIC) notes[n++] = NOTE_NONDETERMINISTIC;
    if (d->engine == ENGINE_TENSOR_CORE) notes[n++] = NOTE_TENSOR_CORE;
    for (int i = 0; i < n && i < requested; i++) static_cast<int*>(elements)[i] = notes[i];
    *count = n;
    return CUDNN_STATUS_SUCCESS;
  }
  if (d->kind == BK_EXECUTION_PLAN && name == 402 && type == T_INT64) {
    *static_cast<long long*>(elements) = (long long)d->workspace;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  return CUDNN_STATUS_NOT_SUPPORTED;
}

EXPORT cudnnStatus_t cudnnBackendExecute(Handle* handle, const Desc* plan, const Desc* pack) {
  if (handle == nullptr || plan == nullptr || pack == nullptr || !plan->finalized ||
      !pack->finalized || plan->kind != BK_EXECUTION_PLAN) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  const Desc* op = operation_of(plan->graph);
  Legacy l;
  if (!legacy_of(op, &l)) return CUDNN_STATUS_BAD_PARAM;
  std::map<long long, void*> data;
  const Attribute* ids = attribute(pack, 1000);
  const Attribute* pointers = attribute(pack, 1001);
  for (size_t i = 0; i < ids->values.size(); i++) {
    data[ids->values[i]] = reinterpret_cast<void*>(pointers->values[i]);
  }
  float* image = static_cast<float*>(data[l.image_id]);
  float* filter = static_cast<float*>(data[l.filter_id]);
  float* output = static_cast<float*>(data[l.output_id]);
  void* workspace = reinterpret_cast<void*>(value(pack, 1003));
  if (image == nullptr || filter == nullptr || output == nullptr ||
      (plan->workspace > 0 && workspace == nullptr)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (plan->engine == ENGINE_NONDETERMINISTIC) {  // a stand-in that fails every gradient test
    float* written = op->kind == BK_CONV_FORWARD ? output : op->kind == BK_CONV_DATA ? image : filter;
    size_t n = op->kind == BK_CONV_FORWARD
                   ? (size_t)l.output.n * l.output.c * l.output.h * l.output.w
               : op->kind == BK_CONV_DATA
                   ? (size_t)l.image.n * l.image.c * l.image.h * l.image.w
                   : (size_t)l.filter.k * l.filter.c * l.filter.r * l.filter.s;
    return enqueue(handle, [=] {
      for (size_t e = 0; e < n; e++) written[e] = std::nanf("");
    });
  }
  l.conv.math = plan->engine == ENGINE_TENSOR_CORE ? 0 : CUDNN_FMA_MATH;
  int algo = ALGO_WITH_WORKSPACE;
  if (op->kind == BK_CONV_FORWARD) {
    return cudnnConvolutionForward(handle, &l.alpha, &l.image, image, &l.filter, filter, &l.conv,
                                   algo, workspace, plan->workspace, &l.beta, &l.output, output);
  }
  if (op->kind == BK_CONV_DATA) {
    return cudnnConvolutionBackwardData(handle, &l.alpha, &l.filter, filter, &l.output, output,
                                        &l.conv, algo, workspace, plan->workspace, &l.beta,
                                        &l.image, image);
  }
  return cudnnConvolutionBackwardFilter(handle, &l.alpha, &l.image, image, &l.output, output,
                                        &l.conv, algo, workspace, plan->workspace, &l.beta,
                                        &l.filter, filter);
}

// ---- cudnn_adv: nothing the engine calls; its version node must exist for the wrapper to load --

EXPORT cudnnStatus_t cudnnAdvVersionCheck() { return CUDNN_STATUS_SUCCESS; }
