// Batch normalization over NCHW activations (nn.BatchNorm2d). The training kernels run a block per
// channel: the channel's n*hw values are summed in double by a fixed tree, then normalized with
// the CPU backend's expressions.
#include "ramtrain.cuh"

extern "C" __global__ void batchnorm_train_f32(const float* x, int n, int c, int hw,
                                               const float* gamma, const float* beta, float eps,
                                               float momentum, float* running_mean,
                                               float* running_var, float* y, float* saved_mean,
                                               float* saved_inv_std) {
  __shared__ double scratch[RT_BLOCK];
  int ch = blockIdx.x;
  long long count = (long long)n * hw;
  double partial = 0;
  for (long long i = threadIdx.x; i < count; i += RT_BLOCK) {
    partial += x[((i / hw) * c + ch) * hw + i % hw];
  }
  double mean = rt_block_sum(partial, scratch) / count;
  partial = 0;
  for (long long i = threadIdx.x; i < count; i += RT_BLOCK) {
    double d = x[((i / hw) * c + ch) * hw + i % hw] - mean;
    partial += d * d;
  }
  double squares = rt_block_sum(partial, scratch);
  double var = squares / count;
  double inv_std = 1.0 / sqrt(var + eps);
  float scale = (float)(gamma[ch] * inv_std);
  float shift = (float)(beta[ch] - mean * gamma[ch] * inv_std);
  for (long long i = threadIdx.x; i < count; i += RT_BLOCK) {
    long long at = ((i / hw) * c + ch) * hw + i % hw;
    y[at] = x[at] * scale + shift;
  }
  if (threadIdx.x == 0) {
    saved_mean[ch] = (float)mean;
    saved_inv_std[ch] = (float)inv_std;
    double unbiased = count > 1 ? squares / (count - 1) : var;
    running_mean[ch] = (float)((1 - momentum) * running_mean[ch] + momentum * mean);
    running_var[ch] = (float)((1 - momentum) * running_var[ch] + momentum * unbiased);
  }
}
RT_KERNEL_WITH_BARRIERS(batchnorm_train_f32)

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

// dx = gamma * invStd * (dy - mean(dy) - xhat * mean(dy * xhat)); dgamma and dbeta accumulate.
extern "C" __global__ void batchnorm_backward_f32(const float* x, const float* dy, int n, int c,
                                                  int hw, const float* gamma,
                                                  const float* saved_mean,
                                                  const float* saved_inv_std, float* dgamma,
                                                  float* dbeta, float* dx) {
  __shared__ double scratch[RT_BLOCK];
  int ch = blockIdx.x;
  long long count = (long long)n * hw;
  float mean = saved_mean[ch];
  float inv_std = saved_inv_std[ch];
  double partial_dy = 0;
  double partial_dy_xhat = 0;
  for (long long i = threadIdx.x; i < count; i += RT_BLOCK) {
    long long at = ((i / hw) * c + ch) * hw + i % hw;
    float g = dy[at];
    partial_dy += g;
    partial_dy_xhat += g * (x[at] - mean) * inv_std;
  }
  double sum_dy = rt_block_sum(partial_dy, scratch);
  double sum_dy_xhat = rt_block_sum(partial_dy_xhat, scratch);
  float k = gamma[ch] * inv_std;
  float mean_dy = (float)(sum_dy / count);
  float mean_dy_xhat = (float)(sum_dy_xhat / count);
  for (long long i = threadIdx.x; i < count; i += RT_BLOCK) {
    long long at = ((i / hw) * c + ch) * hw + i % hw;
    float xhat = (x[at] - mean) * inv_std;
    dx[at] = k * (dy[at] - mean_dy - xhat * mean_dy_xhat);
  }
  if (threadIdx.x == 0) {
    dgamma[ch] = dgamma[ch] + (float)sum_dy_xhat;
    dbeta[ch] = dbeta[ch] + (float)sum_dy;
  }
}
RT_KERNEL_WITH_BARRIERS(batchnorm_backward_f32)
