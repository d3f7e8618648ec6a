// Batch normalization over NCHW activations (nn.BatchNorm2d). Training runs three launches a
// pass, so that a channel's n*hw values (401,408 at ResNet's stem, batch 32) are read by many
// blocks instead of one: each (chunk, channel) block sums its share of the channel in double
// (fixed tree), one thread a channel adds the chunks in order and derives the statistics, then a
// plain elementwise pass applies them. The chunks' partial sums live in the stream's scratch.
#include "ramtrain.cuh"

// A channel's values, the flat index f in [0, n*hw) standing for image f / hw, position f % hw:
// chunk blockIdx.x covers [blockIdx.x * chunk, +chunk), walked by the block's threads with the
// image and position advanced by subtraction (no 64-bit division per element).
#define RT_FOR_CHUNK(img, p, count, chunk, hw)                                       \
  long long rt_first = (long long)blockIdx.x * (chunk) + threadIdx.x;                \
  long long rt_stop = (long long)(blockIdx.x + 1) * (chunk);                         \
  long long rt_end = rt_stop < (count) ? rt_stop : (long long)(count);               \
  long long img = rt_first / (hw);                                                   \
  int p = (int)(rt_first % (hw));                                                    \
  for (long long rt_f = rt_first; rt_f < rt_end;                                     \
       rt_f += RT_BLOCK, p += RT_BLOCK, img += p / (hw), p %= (hw))

// partials[(ch * chunks + chunk) * 2 + {0, 1}] = the chunk's Σ x and Σ x², in double.
extern "C" __global__ void batchnorm_sums_f32(const float* x, int n, int c, int hw,
                                              long long chunk, double* partials) {
  __shared__ double scratch[RT_BLOCK];
  int ch = blockIdx.y;
  double sum = 0;
  double squares = 0;
  RT_FOR_CHUNK(img, p, (long long)n * hw, chunk, hw) {
    double v = x[(img * c + ch) * hw + p];
    sum += v;
    squares += v * v;
  }
  sum = rt_block_sum(sum, scratch);
  squares = rt_block_sum(squares, scratch);
  if (threadIdx.x == 0) {
    double* out = partials + ((long long)ch * gridDim.x + blockIdx.x) * 2;
    out[0] = sum;
    out[1] = squares;
  }
}
RT_KERNEL_WITH_BARRIERS(batchnorm_sums_f32)

// A thread a channel: the statistics from the chunks' sums (added in chunk order), the running
// averages, and the affine map y = x * scale + shift it leaves in affine[2 * ch + {0, 1}].
extern "C" __global__ void batchnorm_statistics_f32(const double* partials, int chunks, int c,
                                                    long long count, const float* gamma,
                                                    const float* beta, float eps, float momentum,
                                                    float* running_mean, float* running_var,
                                                    float* saved_mean, float* saved_inv_std,
                                                    float* affine) {
  RT_FOR_EACH(ch, c) {
    double sum = 0;
    double squares = 0;
    for (int k = 0; k < chunks; k++) {
      sum += partials[(ch * chunks + k) * 2];
      squares += partials[(ch * chunks + k) * 2 + 1];
    }
    double mean = sum / count;
    double centred = squares - sum * mean;  // Σ (x - mean)², never below 0
    centred = centred > 0 ? centred : 0;
    double var = centred / count;
    double inv_std = 1.0 / sqrt(var + eps);
    affine[2 * ch] = (float)(gamma[ch] * inv_std);
    affine[2 * ch + 1] = (float)(beta[ch] - mean * gamma[ch] * inv_std);
    saved_mean[ch] = (float)mean;
    saved_inv_std[ch] = (float)inv_std;
    double unbiased = count > 1 ? centred / (count - 1) : var;
    running_mean[ch] = (float)((1 - momentum) * running_mean[ch] + momentum * mean);
    running_var[ch] = (float)((1 - momentum) * running_var[ch] + momentum * unbiased);
  }
}
RT_KERNEL(batchnorm_statistics_f32)

// y = x * scale + shift: a block row per plane (blockIdx.x = image * c + channel).
extern "C" __global__ void batchnorm_apply_f32(const float* x, int c, int hw, const float* affine,
                                               float* y) {
  long long plane = blockIdx.x;
  int ch = (int)(plane % c);
  float scale = affine[2 * ch];
  float shift = affine[2 * ch + 1];
  for (int p = blockIdx.y * blockDim.x + threadIdx.x; p < hw; p += gridDim.y * blockDim.x) {
    y[plane * hw + p] = x[plane * hw + p] * scale + shift;
  }
}
RT_KERNEL(batchnorm_apply_f32)

extern "C" __global__ void batchnorm_inference_f32(const float* x, int n, int c, int hw,
                                                   const float* gamma, const float* beta,
                                                   float eps, const float* running_mean,
                                                   const float* running_var, float* y) {
  long long total = (long long)n * c * hw;
  RT_FOR_EACH(i, total) {
    int ch = (int)((i / hw) % c);
    double inv_std = 1.0 / sqrt((double)(running_var[ch] + eps));
    float scale = (float)(gamma[ch] * inv_std);
    float shift = (float)(beta[ch] - running_mean[ch] * gamma[ch] * inv_std);
    y[i] = x[i] * scale + shift;
  }
}
RT_KERNEL(batchnorm_inference_f32)

// Backward, the same three steps: the chunks' Σ dy and Σ dy * xhat ...
extern "C" __global__ void batchnorm_backward_sums_f32(const float* x, const float* dy, int n,
                                                       int c, int hw, long long chunk,
                                                       const float* saved_mean,
                                                       const float* saved_inv_std,
                                                       double* partials) {
  __shared__ double scratch[RT_BLOCK];
  int ch = blockIdx.y;
  float mean = saved_mean[ch];
  float inv_std = saved_inv_std[ch];
  double sum_dy = 0;
  double sum_dy_xhat = 0;
  RT_FOR_CHUNK(img, p, (long long)n * hw, chunk, hw) {
    long long at = (img * c + ch) * hw + p;
    float g = dy[at];
    sum_dy += g;
    sum_dy_xhat += g * (x[at] - mean) * inv_std;
  }
  sum_dy = rt_block_sum(sum_dy, scratch);
  sum_dy_xhat = rt_block_sum(sum_dy_xhat, scratch);
  if (threadIdx.x == 0) {
    double* out = partials + ((long long)ch * gridDim.x + blockIdx.x) * 2;
    out[0] = sum_dy;
    out[1] = sum_dy_xhat;
  }
}
RT_KERNEL_WITH_BARRIERS(batchnorm_backward_sums_f32)

// ... a thread a channel adding them in chunk order into dgamma, dbeta and the coefficients of
// dx = k * (dy - mean(dy) - xhat * mean(dy * xhat)), k = gamma * invStd, left in coef[3 * ch] ...
extern "C" __global__ void batchnorm_backward_statistics_f32(const double* partials, int chunks,
                                                             int c, long long count,
                                                             const float* gamma,
                                                             const float* saved_inv_std,
                                                             float* dgamma, float* dbeta,
                                                             float* coef) {
  RT_FOR_EACH(ch, c) {
    double sum_dy = 0;
    double sum_dy_xhat = 0;
    for (int k = 0; k < chunks; k++) {
      sum_dy += partials[(ch * chunks + k) * 2];
      sum_dy_xhat += partials[(ch * chunks + k) * 2 + 1];
    }
    coef[3 * ch] = gamma[ch] * saved_inv_std[ch];
    coef[3 * ch + 1] = (float)(sum_dy / count);
    coef[3 * ch + 2] = (float)(sum_dy_xhat / count);
    dgamma[ch] = dgamma[ch] + (float)sum_dy_xhat;
    dbeta[ch] = dbeta[ch] + (float)sum_dy;
  }
}
RT_KERNEL(batchnorm_backward_statistics_f32)

// ... and dx, a block row per plane.
extern "C" __global__ void batchnorm_backward_apply_f32(const float* x, const float* dy, int c,
                                                        int hw, const float* saved_mean,
                                                        const float* saved_inv_std,
                                                        const float* coef, float* dx) {
  long long plane = blockIdx.x;
  int ch = (int)(plane % c);
  float mean = saved_mean[ch];
  float inv_std = saved_inv_std[ch];
  float k = coef[3 * ch];
  float mean_dy = coef[3 * ch + 1];
  float mean_dy_xhat = coef[3 * ch + 2];
  for (int p = blockIdx.y * blockDim.x + threadIdx.x; p < hw; p += gridDim.y * blockDim.x) {
    long long at = plane * hw + p;
    float xhat = (x[at] - mean) * inv_std;
    dx[at] = k * (dy[at] - mean_dy - xhat * mean_dy_xhat);
  }
}
RT_KERNEL(batchnorm_backward_apply_f32)
