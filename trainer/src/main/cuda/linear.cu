// The kernels around a fully connected layer and the loss: bias, its gradient, softmax
// cross-entropy, and the input normalization that turns uint8 pixels into the first activations.
#include "ramtrain.cuh"

// y[r, c] += bias[c]
extern "C" __global__ void add_bias_f32(float* y, const float* bias, int rows, int cols) {
  long long n = (long long)rows * cols;
  RT_FOR_EACH(i, n) { y[i] += bias[i % cols]; }
}
RT_KERNEL(add_bias_f32)

// Column sums in ColumnSumOrder's order, two launches. First each group's partial sums: a block of
// RT_COLUMNS x RT_COLUMN_LANES threads per RT_COLUMNS columns and group blockIdx.y, lane
// l = blockIdx.y * RT_COLUMN_LANES + threadIdx.y summing the rows r ≡ l (mod lanes) in increasing
// order in double, the group's lanes then added in lane order into partials[group][c].
// Neighbouring threads read neighbouring columns of a row.
extern "C" __global__ void sum_rows_f32(const float* x, double* partials, int rows, int cols) {
  __shared__ double lane_sum[RT_COLUMN_LANES][RT_COLUMNS];
  int c = blockIdx.x * RT_COLUMNS + threadIdx.x;
  long long lanes = (long long)RT_COLUMN_LANES * gridDim.y;
  double sum = 0;
  for (long long r = (long long)blockIdx.y * RT_COLUMN_LANES + threadIdx.y; c < cols && r < rows;
       r += lanes) {
    sum += x[r * cols + c];
  }
  lane_sum[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    double total = 0;
    for (int l = 0; l < RT_COLUMN_LANES; l++) {
      total += lane_sum[l][threadIdx.x];
    }
    partials[(long long)blockIdx.y * cols + c] = total;
  }
}
RT_KERNEL_WITH_BARRIERS(sum_rows_f32)

// Then out[c] = beta * out[c] + the groups' partial sums added in group order (beta 0: the sum
// alone; beta 1: accumulated into a gradient).
extern "C" __global__ void column_totals_f32(const double* partials, int groups, int cols,
                                             float* out, float beta) {
  RT_FOR_EACH(c, cols) {
    double total = 0;
    for (int g = 0; g < groups; g++) {
      total += partials[(long long)g * cols + c];
    }
    out[c] = (float)(beta == 0.0f ? total : (double)(beta * out[c]) + total);
  }
}
RT_KERNEL(column_totals_f32)

// Softmax cross-entropy with label smoothing, a thread per row (a row is at most a few thousand
// classes). A label outside [0, classes) is reported through the stream's status word and the
// row's loss becomes NaN, as no class can be trusted.
// With mix < 1 (mixup, cutmix) row r's target is mix times its own and 1 - mix times that of row
// rows - 1 - r, as the CPU backend computes it (in double).
extern "C" __global__ void softmax_xent_f32(const float* logits, const int* labels, int rows,
                                            int classes, float smoothing, float mix, float* loss,
                                            float* dlogits, RtStatus* status) {
  double off = (double)smoothing / classes;
  double on = 1.0 - smoothing + off;
  double lambda = mix;
  double other = 1.0 - lambda;
  RT_FOR_EACH(r, rows) {
    int label = labels[r];
    int partner = mix == 1.0f ? label : labels[rows - 1 - r];
    const float* row = logits + (long long)r * classes;
    float* grad = dlogits + (long long)r * classes;
    if (label < 0 || label >= classes || partner < 0 || partner >= classes) {
      bool own = label < 0 || label >= classes;
      if (atomicCAS(&status->code, RT_STATUS_OK, RT_STATUS_BAD_LABEL) == RT_STATUS_OK) {
        status->where = own ? (int)r : (int)(rows - 1 - r);
        status->value = own ? label : partner;
        status->limit = classes;
      }
      loss[r] = __int_as_float(0x7FC00000);
      continue;
    }
    double max = -1.0 / 0.0;
    for (int c = 0; c < classes; c++) {
      max = fmax(max, (double)row[c]);
    }
    double sum = 0;
    for (int c = 0; c < classes; c++) {
      sum += exp(row[c] - max);
    }
    double log_sum = max + log(sum);
    double row_loss = 0;
    for (int c = 0; c < classes; c++) {
      double target = mix == 1.0f ? (c == label ? on : off)
                                  : lambda * (c == label ? on : off) + other * (c == partner ? on : off);
      double logp = row[c] - log_sum;
      row_loss -= target * logp;
      grad[c] = (float)((exp(logp) - target) / rows);
    }
    loss[r] = (float)row_loss;
  }
}
RT_KERNEL(softmax_xent_f32)

// timm's batch mixup in place, a thread per element of the first half of the batch: both samples
// of a pair are read before either is written. Products rounded before the sum (no FMA): the CPU
// backend's bits. The middle sample of an odd batch is its own mirror.
extern "C" __global__ void blend_batch_f32(float* x, int batch, long long sample, float lambda,
                                           float one_minus) {
  long long total = (long long)((batch + 1) / 2) * sample;
  RT_FOR_EACH(o, total) {
    long long i = o / sample;
    long long k = o % sample;
    long long a = i * sample + k;
    long long b = (batch - 1 - i) * sample + k;
    float xa = x[a];
    float xb = x[b];
    float mixed_a = xa * lambda;
    float mixed_b = xb * lambda;
    x[a] = mixed_a + xb * one_minus;
    if (b != a) {
      x[b] = mixed_b + xa * one_minus;
    }
  }
}
RT_KERNEL(blend_batch_f32)

// timm's batch cutmix in place: the pair (i, batch - 1 - i) swaps the box of every channel, a
// thread per box element of the first half of the batch.
extern "C" __global__ void cutmix_batch_f32(float* x, int batch, int channels, int height,
                                            int width, int top, int bottom, int left, int right) {
  long long box_w = right - left;
  long long box = (long long)(bottom - top) * box_w;
  long long plane = (long long)height * width;
  long long total = (long long)(batch / 2) * channels * box;
  RT_FOR_EACH(o, total) {
    long long p = o % box;
    long long ic = o / box;
    long long c = ic % channels;
    long long i = ic / channels;
    long long y = top + p / box_w;
    long long col = left + p % box_w;
    long long at = c * plane + y * width + col;
    long long a = i * channels * plane + at;
    long long b = (batch - 1 - i) * channels * plane + at;
    float t = x[a];
    x[a] = x[b];
    x[b] = t;
  }
}
RT_KERNEL(cutmix_batch_f32)


// Per-channel scale and shift of the input normalization, for up to four channels:
// (x / 255 - mean) / std = x * scale - shift with scale = 1 / (255 std), shift = mean / std.
struct RtChannelAffine {
  float scale[4];
  float shift[4];
};

// uint8 HWC images to F32 NCHW, a thread per output element.
extern "C" __global__ void normalize_images_u8(const unsigned char* u8, int n, int h, int w,
                                               int c, RtChannelAffine affine, float* out) {
  long long plane = (long long)h * w;
  long long total = (long long)n * c * plane;
  RT_FOR_EACH(o, total) {
    long long p = o % plane;
    long long nc = o / plane;
    int ch = (int)(nc % c);
    long long image = nc / c;
    float pixel = (float)u8[image * plane * c + p * c + ch];
    out[o] = pixel * affine.scale[ch] - affine.shift[ch];
  }
}
RT_KERNEL(normalize_images_u8)

// ColorJitter (brightness, contrast, saturation) of a normalized NCHW batch in place, a block per
// image: the CPU backend's draws (the counter RNG at 8 i + k) and expressions; the contrast's mean
// grey is summed in double by the block's fixed tree (the CPU sums pixel after pixel: the means
// agree to double rounding, so the results within a float ulp or two).
__device__ __forceinline__ float rt_unit(float v) { return fminf(fmaxf(v, 0.0f), 1.0f); }

__device__ __forceinline__ float rt_grey(const float* v, int c, long long plane, long long p) {
  return c == 1 ? v[p] : 0.2989f * v[p] + 0.587f * v[plane + p] + 0.114f * v[2 * plane + p];
}

extern "C" __global__ void color_jitter_f32(float* x, int batch, int c, int plane,
                                            RtChannelAffine unit, float brightness, float contrast,
                                            float saturation, unsigned long long seed) {
  __shared__ double scratch[RT_BLOCK];
  int i = blockIdx.x;
  float* v = x + (long long)i * c * plane;
  // unit.scale holds std and unit.shift mean: v = x * std + mean, back with (v - mean) / std
  for (long long k = threadIdx.x; k < (long long)c * plane; k += RT_BLOCK) {
    int ch = (int)(k / plane);
    v[k] = v[k] * unit.scale[ch] + unit.shift[ch];
  }
  __syncthreads();
  int order[3] = {0, 1, 2};
  for (int k = 2; k >= 1; k--) {
    int j = (int)((double)rt_uniform(seed, 8ull * i + (2 - k)) * (k + 1));
    int t = order[k];
    order[k] = order[j];
    order[j] = t;
  }
  for (int step = 0; step < 3; step++) {
    int which = order[step];
    float s = which == 0 ? brightness : which == 1 ? contrast : saturation;
    if (s == 0.0f || (which == 2 && c == 1)) {
      continue;
    }
    float lo = fmaxf(0.0f, 1.0f - s);
    float hi = 1.0f + s;
    float f = lo + (hi - lo) * rt_uniform(seed, 8ull * i + 2 + which);
    float g = 1.0f - f;
    if (which == 0) {
      for (long long k = threadIdx.x; k < (long long)c * plane; k += RT_BLOCK) {
        v[k] = rt_unit(f * v[k]);
      }
    } else if (which == 1) {
      double partial = 0;
      for (long long p = threadIdx.x; p < plane; p += RT_BLOCK) {
        partial += rt_grey(v, c, plane, p);
      }
      float m = (float)(rt_block_sum(partial, scratch) / plane);
      for (long long k = threadIdx.x; k < (long long)c * plane; k += RT_BLOCK) {
        v[k] = rt_unit(f * v[k] + g * m);
      }
    } else {
      for (long long p = threadIdx.x; p < plane; p += RT_BLOCK) {
        float grey = rt_grey(v, c, plane, p);
        for (int ch = 0; ch < c; ch++) {
          v[ch * plane + p] = rt_unit(f * v[ch * plane + p] + g * grey);
        }
      }
    }
    __syncthreads();
  }
  for (long long k = threadIdx.x; k < (long long)c * plane; k += RT_BLOCK) {
    int ch = (int)(k / plane);
    v[k] = (v[k] - unit.shift[ch]) / unit.scale[ch];
  }
}
RT_KERNEL_WITH_BARRIERS(color_jitter_f32)
