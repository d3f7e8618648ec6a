// Layer normalization and row softmax (transformers, ConvNeXt's LayerNorm2d): a warp per
// normalized group or row, RT_ROWS a block, lane l summing the elements j ≡ l (mod RT_ROW_LANES)
// in double and the lanes then added in lane order (rt_row_sum), as the CPU backend's Java engine
// sums (NormKernels), with its expressions; no FMA contraction, so layer norm gives its bits.
#include "ramtrain.cuh"

// The largest of the lanes' maxima, taken in lane order as Java's Math.max (NaN wins).
__device__ __forceinline__ float rt_row_max(float partial, double* lanes) {
  double* row = lanes + threadIdx.y * RT_ROW_LANES;
  row[threadIdx.x] = partial;
  __syncthreads();
  float max = -INFINITY;
  for (int l = 0; l < RT_ROW_LANES; l++) {
    float v = (float)row[l];
    max = v != v || v > max ? v : max;
  }
  __syncthreads();
  return max;
}

// The first of a block's rows in a grid-stride walk: the same count of turns for every thread of
// the block, so the row sums' barriers are reached by all; threadIdx.y's row is first + y.
#define RT_FOR_EACH_ROW_BLOCK(first, rows)                                           \
  for (long long first = (long long)blockIdx.x * RT_ROWS; first < (rows); \
       first += (long long)gridDim.x * RT_ROWS)

// x as [outer, size, inner]: group g = (o, i) holds x[(o * size + j) * inner + i] for j < size.
extern "C" __global__ void layernorm_f32(const float* x, int outer, int size, int inner,
                                         const float* gamma, const float* beta, float eps,
                                         float* y, float* saved_mean, float* saved_inv_std) {
  __shared__ double lanes[RT_ROWS * RT_ROW_LANES];
  long long groups = (long long)outer * inner;
  RT_FOR_EACH_ROW_BLOCK(first, groups) {
    long long g = first + threadIdx.y;
    bool live = g < groups;
    long long base = live ? (g / inner) * size * inner + g % inner : 0;
    const float* v = x + base;
    double sum = 0;
    for (int j = threadIdx.x; live && j < size; j += RT_ROW_LANES) {
      sum += v[(long long)j * inner];
    }
    double mean = rt_row_sum(sum, lanes) / size;
    double squares = 0;
    for (int j = threadIdx.x; live && j < size; j += RT_ROW_LANES) {
      double d = v[(long long)j * inner] - mean;
      squares += d * d;
    }
    double inv_std = 1 / sqrt(rt_row_sum(squares, lanes) / size + eps);
    if (!live) {
      continue;
    }
    if (threadIdx.x == 0) {
      saved_mean[g] = (float)mean;
      saved_inv_std[g] = (float)inv_std;
    }
    float* out = y + base;
    for (int j = threadIdx.x; j < size; j += RT_ROW_LANES) {
      out[(long long)j * inner] =
          (float)((v[(long long)j * inner] - mean) * inv_std * gamma[j] + beta[j]);
    }
  }
}
RT_KERNEL_WITH_BARRIERS(layernorm_f32)

__device__ __forceinline__ double rt_xhat(float v, const float* mean, const float* inv_std,
                                          long long g) {
  return ((double)v - mean[g]) * inv_std[g];
}

// dx of each group from g = dy * gamma: invStd * (g - mean(g) - xhat * mean(g * xhat)).
extern "C" __global__ void layernorm_backward_dx_f32(const float* x, const float* dy, int outer,
                                                     int size, int inner, const float* gamma,
                                                     const float* saved_mean,
                                                     const float* saved_inv_std, float* dx) {
  __shared__ double lanes[RT_ROWS * RT_ROW_LANES];
  long long groups = (long long)outer * inner;
  RT_FOR_EACH_ROW_BLOCK(first, groups) {
    long long g = first + threadIdx.y;
    bool live = g < groups;
    long long base = live ? (g / inner) * size * inner + g % inner : 0;
    double sum_g = 0;
    double sum_g_xhat = 0;
    for (int j = threadIdx.x; live && j < size; j += RT_ROW_LANES) {
      long long at = base + (long long)j * inner;
      double xhat = rt_xhat(x[at], saved_mean, saved_inv_std, g);
      double gy = (double)dy[at] * gamma[j];
      sum_g += gy;
      sum_g_xhat += gy * xhat;
    }
    sum_g = rt_row_sum(sum_g, lanes);
    sum_g_xhat = rt_row_sum(sum_g_xhat, lanes);
    if (!live) {
      continue;
    }
    double inv_std = saved_inv_std[g];
    for (int j = threadIdx.x; j < size; j += RT_ROW_LANES) {
      long long at = base + (long long)j * inner;
      double xhat = rt_xhat(x[at], saved_mean, saved_inv_std, g);
      double gy = (double)dy[at] * gamma[j];
      dx[at] = (float)(inv_std * (gy - sum_g / size - xhat * (sum_g_xhat / size)));
    }
  }
}
RT_KERNEL_WITH_BARRIERS(layernorm_backward_dx_f32)

// dgamma[j] += Σ dy * xhat and dbeta[j] += Σ dy over every group r = o * inner + i, in
// ColumnSumOrder's order as sum_rows_f32 sums (the CPU's bits): this launch writes each row group's
// partial sums, [groups][size] of Σ dy * xhat then [groups][size] of Σ dy, and column_totals_f32
// adds them into dgamma and dbeta. Neighbouring threads read neighbouring features of one group.
extern "C" __global__ void layernorm_backward_params_f32(const float* x, const float* dy,
                                                         int outer, int size, int inner,
                                                         const float* saved_mean,
                                                         const float* saved_inv_std,
                                                         double* partials) {
  __shared__ double lane_dy_xhat[RT_COLUMN_LANES][RT_COLUMNS];
  __shared__ double lane_dy[RT_COLUMN_LANES][RT_COLUMNS];
  int j = blockIdx.x * RT_COLUMNS + threadIdx.x;
  long long groups = (long long)outer * inner;
  long long lanes = (long long)RT_COLUMN_LANES * gridDim.y;
  double sum_dy_xhat = 0;
  double sum_dy = 0;
  if (j < size) {
    for (long long r = (long long)blockIdx.y * RT_COLUMN_LANES + threadIdx.y; r < groups;
         r += lanes) {
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
    for (int l = 0; l < RT_COLUMN_LANES; l++) {
      total_dy_xhat += lane_dy_xhat[l][threadIdx.x];
      total_dy += lane_dy[l][threadIdx.x];
    }
    partials[(long long)blockIdx.y * size + j] = total_dy_xhat;
    partials[((long long)gridDim.y + blockIdx.y) * size + j] = total_dy;
  }
}
RT_KERNEL_WITH_BARRIERS(layernorm_backward_params_f32)

extern "C" __global__ void softmax_f32(const float* x, int rows, int cols, float* y) {
  __shared__ double lanes[RT_ROWS * RT_ROW_LANES];
  RT_FOR_EACH_ROW_BLOCK(first, rows) {
    long long r = first + threadIdx.y;
    bool live = r < rows;
    const float* row = x + (live ? r * cols : 0);
    float max = -INFINITY;
    for (int c = threadIdx.x; live && c < cols; c += RT_ROW_LANES) {
      float v = row[c];
      max = v != v || v > max ? v : max;  // Java's Math.max: NaN wins
    }
    max = rt_row_max(max, lanes);
    double sum = 0;
    for (int c = threadIdx.x; live && c < cols; c += RT_ROW_LANES) {
      sum += exp((double)row[c] - max);
    }
    sum = rt_row_sum(sum, lanes);
    if (!live) {
      continue;
    }
    float* out = y + r * cols;  // may be x: each element is read before it is written
    for (int c = threadIdx.x; c < cols; c += RT_ROW_LANES) {
      out[c] = (float)(exp((double)row[c] - max) / sum);
    }
  }
}
RT_KERNEL_WITH_BARRIERS(softmax_f32)

extern "C" __global__ void softmax_backward_f32(const float* y, const float* dy, int rows,
                                                int cols, float* dx) {
  __shared__ double lanes[RT_ROWS * RT_ROW_LANES];
  RT_FOR_EACH_ROW_BLOCK(first, rows) {
    long long r = first + threadIdx.y;
    bool live = r < rows;
    long long base = live ? r * cols : 0;
    double dot = 0;
    for (int c = threadIdx.x; live && c < cols; c += RT_ROW_LANES) {
      dot += (double)dy[base + c] * y[base + c];
    }
    dot = rt_row_sum(dot, lanes);
    if (!live) {
      continue;
    }
    for (int c = threadIdx.x; c < cols; c += RT_ROW_LANES) {
      dx[base + c] = (float)(y[base + c] * (dy[base + c] - dot));
    }
  }
}
RT_KERNEL_WITH_BARRIERS(softmax_backward_f32)
