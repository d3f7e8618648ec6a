// Layer normalization and row softmax (transformers, ConvNeXt's LayerNorm2d): one thread per
// normalized group or row, summing in double in the CPU backend's order (NormKernels), with its
// expressions; no FMA contraction, so layer norm gives the CPU backend's bits.
#include "ramtrain.cuh"

// x as [outer, size, inner]: group g = (o, i) holds x[(o * size + j) * inner + i] for j < size.
extern "C" __global__ void layernorm_f32(const float* x, int outer, int size, int inner,
                                         const float* gamma, const float* beta, float eps,
                                         float* y, float* saved_mean, float* saved_inv_std) {
  long long groups = (long long)outer * inner;
  RT_FOR_EACH(g, groups) {
    long long o = g / inner;
    long long i = g % inner;
    const float* v = x + o * size * inner + i;
    double mean = 0;
    for (int j = 0; j < size; j++) {
      mean += v[(long long)j * inner];
    }
    mean /= size;
    double squares = 0;
    for (int j = 0; j < size; j++) {
      double d = v[(long long)j * inner] - mean;
      squares += d * d;
    }
    double inv_std = 1 / sqrt(squares / size + eps);
    saved_mean[g] = (float)mean;
    saved_inv_std[g] = (float)inv_std;
    float* out = y + o * size * inner + i;
    for (int j = 0; j < size; j++) {
      out[(long long)j * inner] =
          (float)((v[(long long)j * inner] - mean) * inv_std * gamma[j] + beta[j]);
    }
  }
}
RT_KERNEL(layernorm_f32)

__device__ __forceinline__ double rt_xhat(float v, const float* mean, const float* inv_std,
                                          long long g) {
  return ((double)v - mean[g]) * inv_std[g];
}

// dx of each group from g = dy * gamma: invStd * (g - mean(g) - xhat * mean(g * xhat)).
extern "C" __global__ void layernorm_backward_dx_f32(const float* x, const float* dy, int outer,
                                                     int size, int inner, const float* gamma,
                                                     const float* saved_mean,
                                                     const float* saved_inv_std, float* dx) {
  long long groups = (long long)outer * inner;
  RT_FOR_EACH(g, groups) {
    long long base = (g / inner) * size * inner + g % inner;
    double sum_g = 0;
    double sum_g_xhat = 0;
    for (int j = 0; j < size; j++) {
      long long at = base + (long long)j * inner;
      double xhat = rt_xhat(x[at], saved_mean, saved_inv_std, g);
      double gy = (double)dy[at] * gamma[j];
      sum_g += gy;
      sum_g_xhat += gy * xhat;
    }
    double inv_std = saved_inv_std[g];
    for (int j = 0; j < size; j++) {
      long long at = base + (long long)j * inner;
      double xhat = rt_xhat(x[at], saved_mean, saved_inv_std, g);
      double gy = (double)dy[at] * gamma[j];
      dx[at] = (float)(inv_std * (gy - sum_g / size - xhat * (sum_g_xhat / size)));
    }
  }
}
RT_KERNEL(layernorm_backward_dx_f32)

// dgamma[j] += Σ dy * xhat and dbeta[j] += Σ dy over every group r = o * inner + i. A block of
// RT_LN_FEATURES x RT_LN_LANES threads per RT_LN_FEATURES features: lane l sums, in double, the
// groups r ≡ l (mod RT_LN_LANES) in increasing order; the lanes' sums are then added in lane
// order (NormKernels.layerNormBackward's order, so the CPU's bits). Neighbouring threads read
// neighbouring features of one group, and the batch's groups are shared by RT_LN_LANES threads
// a feature instead of one.
extern "C" __global__ void layernorm_backward_params_f32(const float* x, const float* dy,
                                                         int outer, int size, int inner,
                                                         const float* saved_mean,
                                                         const float* saved_inv_std,
                                                         float* dgamma, float* dbeta) {
  __shared__ double lane_dy_xhat[RT_LN_LANES][RT_LN_FEATURES];
  __shared__ double lane_dy[RT_LN_LANES][RT_LN_FEATURES];
  int j = blockIdx.x * RT_LN_FEATURES + threadIdx.x;
  long long groups = (long long)outer * inner;
  double sum_dy_xhat = 0;
  double sum_dy = 0;
  if (j < size) {
    for (long long r = threadIdx.y; r < groups; r += RT_LN_LANES) {
      long long at = ((r / inner) * size + j) * inner + r % inner;
      sum_dy_xhat += dy[at] * rt_xhat(x[at], saved_mean, saved_inv_std, r);
      sum_dy += dy[at];
    }
  }
  lane_dy_xhat[threadIdx.y][threadIdx.x] = sum_dy_xhat;
  lane_dy[threadIdx.y][threadIdx.x] = sum_dy;
  __syncthreads();
  if (threadIdx.y == 0 && j < size) {
    double total_dy_xhat = 0;
    double total_dy = 0;
    for (int l = 0; l < RT_LN_LANES; l++) {
      total_dy_xhat += lane_dy_xhat[l][threadIdx.x];
      total_dy += lane_dy[l][threadIdx.x];
    }
    dgamma[j] = (float)(dgamma[j] + total_dy_xhat);
    dbeta[j] = (float)(dbeta[j] + total_dy);
  }
}
RT_KERNEL_WITH_BARRIERS(layernorm_backward_params_f32)

extern "C" __global__ void softmax_f32(const float* x, int rows, int cols, float* y) {
  RT_FOR_EACH(r, rows) {
    const float* row = x + r * cols;
    float max = -INFINITY;
    for (int c = 0; c < cols; c++) {
      float v = row[c];
      max = v != v || v > max ? v : max;  // Java's Math.max: NaN wins
    }
    double sum = 0;
    for (int c = 0; c < cols; c++) {
      sum += exp((double)row[c] - max);
    }
    float* out = y + r * cols;
    for (int c = 0; c < cols; c++) {
      out[c] = (float)(exp((double)row[c] - max) / sum);
    }
  }
}
RT_KERNEL(softmax_f32)

extern "C" __global__ void softmax_backward_f32(const float* y, const float* dy, int rows,
                                                int cols, float* dx) {
  RT_FOR_EACH(r, rows) {
    long long base = r * cols;
    double dot = 0;
    for (int c = 0; c < cols; c++) {
      dot += (double)dy[base + c] * y[base + c];
    }
    for (int c = 0; c < cols; c++) {
      dx[base + c] = (float)(y[base + c] * (dy[base + c] - dot));
    }
  }
}
RT_KERNEL(softmax_backward_f32)
