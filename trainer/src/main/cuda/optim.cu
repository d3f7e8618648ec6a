// Optimizer steps over a slab of parameters and gradient-norm clipping. The arithmetic is the
// Java reference's (SgdMath, AdamWMath, GradClipMath) in the same order, so a step on the GPU and
// one on the host give the same bits; AdamW's bias corrections come from the host as AdamWMath
// computes them.
#include "ramtrain.cuh"

extern "C" __global__ void sgd_step_f32(float* param, const float* grad, float* buf, long long n,
                                        float lr, float mu, float weight_decay, int nesterov) {
  RT_FOR_EACH(i, n) {
    float g = grad[i] + weight_decay * param[i];
    if (mu != 0.0f) {
      float b = mu * buf[i] + g;
      buf[i] = b;
      g = nesterov ? g + mu * b : b;
    }
    param[i] = param[i] - lr * g;
  }
}
RT_KERNEL(sgd_step_f32)

extern "C" __global__ void adamw_step_f32(float* param, const float* grad, float* m, float* v,
                                          long long n, float beta1, float beta2, float eps,
                                          float decay, float step_size, float sqrt_correction) {
  RT_FOR_EACH(i, n) {
    float g = grad[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / sqrt_correction + eps;
    param[i] = param[i] * decay - step_size * mi / denom;
  }
}
RT_KERNEL(adamw_step_f32)

// Clipping, in three launches on one stream and no host round-trip: each chunk's sum of squares
// (GradClipMath's chunks), the norm and the factor from the chunks in order, then the scaling.
extern "C" __global__ void clip_chunk_squares_f32(const float* grads, long long n,
                                                  long long chunk_size, double* partial) {
  __shared__ double scratch[RT_BLOCK];
  long long from = blockIdx.x * chunk_size;
  long long to = from + chunk_size < n ? from + chunk_size : n;
  double sum = 0;
  for (long long i = from + threadIdx.x; i < to; i += RT_BLOCK) {
    double g = grads[i];
    sum += g * g;
  }
  double total = rt_block_sum(sum, scratch);
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = total;
  }
}
RT_KERNEL_WITH_BARRIERS(clip_chunk_squares_f32)

extern "C" __global__ void clip_norm_f32(const double* partial, int chunks, float max_norm,
                                         float* norm, float* coef) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    double total = 0;
    for (int i = 0; i < chunks; i++) {
      total += partial[i];
    }
    float l2 = (float)sqrt(total);
    norm[0] = l2;
    float c = max_norm / (l2 + 1e-6f);
    coef[0] = max_norm > 0.0f && c < 1.0f ? c : 1.0f;
  }
}
RT_KERNEL(clip_norm_f32)

extern "C" __global__ void clip_scale_f32(float* grads, long long n, const float* coef) {
  float c = coef[0];
  if (c < 1.0f) {
    RT_FOR_EACH(i, n) { grads[i] = grads[i] * c; }
  }
}
RT_KERNEL(clip_scale_f32)
