// Convolution (as im2col + GEMM) and max pooling kernels on NCHW activations.
#include "ramtrain.cuh"

// Image i's block of cols is [c*kh*kw, oh*ow]; a thread per element of cols.
extern "C" __global__ void im2col_f32(const float* x, int n, int c, int h, int w, int kh, int kw,
                                      int stride, int pad, int oh, int ow, float* cols) {
  long long positions = (long long)oh * ow;
  long long block = (long long)c * kh * kw * positions;
  long long total = (long long)n * block;
  RT_FOR_EACH(o, total) {
    long long img = o / block;
    long long r = o % block;
    int row = (int)(r / positions);
    int pos = (int)(r % positions);
    int ch = row / (kh * kw);
    int ky = (row / kw) % kh;
    int kx = row % kw;
    int iy = (pos / ow) * stride - pad + ky;
    int ix = (pos % ow) * stride - pad + kx;
    bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
    cols[o] = inside ? x[((img * c + ch) * h + iy) * w + ix] : 0.0f;
  }
}
RT_KERNEL(im2col_f32)

// The adjoint of im2col, gathered: a thread per input element sums the columns that read it, in
// the CPU backend's order (kernel row, then kernel column), so no atomics and the same bits.
extern "C" __global__ void col2im_f32(const float* cols, int n, int c, int h, int w, int kh,
                                      int kw, int stride, int pad, int oh, int ow, float* dx) {
  long long positions = (long long)oh * ow;
  long long block = (long long)c * kh * kw * positions;
  long long total = (long long)n * c * h * w;
  RT_FOR_EACH(i, total) {
    int ix = (int)(i % w);
    int iy = (int)((i / w) % h);
    int ch = (int)((i / ((long long)w * h)) % c);
    long long img = i / ((long long)w * h * c);
    float sum = 0.0f;
    for (int ky = 0; ky < kh; ky++) {
      int ty = iy + pad - ky;
      if (ty < 0 || ty % stride != 0 || ty / stride >= oh) {
        continue;
      }
      for (int kx = 0; kx < kw; kx++) {
        int tx = ix + pad - kx;
        if (tx < 0 || tx % stride != 0 || tx / stride >= ow) {
          continue;
        }
        long long row = ((long long)ch * kh + ky) * kw + kx;
        sum += cols[img * block + row * positions + (ty / stride) * ow + tx / stride];
      }
    }
    dx[i] = sum;
  }
}
RT_KERNEL(col2im_f32)

extern "C" __global__ void add_channel_bias_f32(float* y, const float* bias, int n, int c,
                                                int hw) {
  long long total = (long long)n * c * hw;
  RT_FOR_EACH(i, total) { y[i] += bias[(i / hw) % c]; }
}
RT_KERNEL(add_channel_bias_f32)

// out[ch] += sum over images and positions of dy: a block per channel; each position's sum over
// images in float (as the CPU backend's lanes), the positions then summed in double.
extern "C" __global__ void sum_channels_f32(const float* dy, float* out, int n, int c, int hw) {
  __shared__ double scratch[RT_BLOCK];
  int ch = blockIdx.x;
  double partial = 0;
  for (int p = threadIdx.x; p < hw; p += RT_BLOCK) {
    float lane = 0.0f;
    for (int img = 0; img < n; img++) {
      lane += dy[((long long)img * c + ch) * hw + p];
    }
    partial += lane;
  }
  double total = rt_block_sum(partial, scratch);
  if (threadIdx.x == 0) {
    out[ch] = out[ch] + (float)total;
  }
}
RT_KERNEL_WITH_BARRIERS(sum_channels_f32)

// k x k max pooling without padding, a thread per output: the first largest value wins, as on
// the CPU; argmax holds its index in the plane.
// Padding never wins: the window's first in-plane value starts, a later one wins only when
// strictly greater (the CPU backend's scan order and ties).
extern "C" __global__ void max_pool_f32(const float* x, int n, int c, int h, int w, int k,
                                        int stride, int pad, int oh, int ow, float* y,
                                        int* argmax) {
  long long total = (long long)n * c * oh * ow;
  RT_FOR_EACH(o, total) {
    int ox = (int)(o % ow);
    int oy = (int)((o / ow) % oh);
    long long nc = o / ((long long)ow * oh);
    const float* plane = x + nc * h * w;
    int at = -1;
    for (int ky = 0; ky < k; ky++) {
      int iy = oy * stride - pad + ky;
      if (iy < 0 || iy >= h) {
        continue;
      }
      for (int kx = 0; kx < k; kx++) {
        int ix = ox * stride - pad + kx;
        if (ix < 0 || ix >= w) {
          continue;
        }
        int i = iy * w + ix;
        if (at < 0 || plane[i] > plane[at]) {
          at = i;
        }
      }
    }
    y[o] = plane[at];
    argmax[o] = at;
  }
}
RT_KERNEL(max_pool_f32)

// Routes dy to the recorded winners, gathered: a thread per input element adds the gradients of
// the windows it won, in output order (row, then column), from 0 — the CPU backend's scatter in
// output order gives each element the same additions in the same order, so the same bits.
extern "C" __global__ void max_pool_backward_f32(const float* dy, const int* argmax, int planes,
                                                 int h, int w, int k, int stride, int pad,
                                                 int oh, int ow, float* dx) {
  long long total = (long long)planes * h * w;
  RT_FOR_EACH(i, total) {
    int ix = (int)(i % w);
    int iy = (int)((i / w) % h);
    long long nc = i / ((long long)w * h);
    int at = iy * w + ix;
    // The windows holding (iy, ix): oy * stride - pad <= iy < oy * stride - pad + k.
    int oy_from = (iy + pad - k + stride) / stride;
    int oy_to = (iy + pad) / stride;
    int ox_from = (ix + pad - k + stride) / stride;
    int ox_to = (ix + pad) / stride;
    oy_from = oy_from > 0 ? oy_from : 0;
    ox_from = ox_from > 0 ? ox_from : 0;
    oy_to = oy_to < oh - 1 ? oy_to : oh - 1;
    ox_to = ox_to < ow - 1 ? ox_to : ow - 1;
    const float* grad = dy + nc * oh * ow;
    const int* where = argmax + nc * oh * ow;
    float sum = 0.0f;
    for (int oy = oy_from; oy <= oy_to; oy++) {
      for (int ox = ox_from; ox <= ox_to; ox++) {
        if (where[oy * ow + ox] == at) {
          sum += grad[oy * ow + ox];
        }
      }
    }
    dx[i] = sum;
  }
}
RT_KERNEL(max_pool_backward_f32)

// Depthwise k x k convolution, stride 1, "same" padding (ConvNeXt's conv_dw): NCHW input,
// channels-last output y[n][py][px][ch]. A thread per output, numbered in NCHW order so that a
// warp reads neighbouring input; its in-image taps summed in row order in fp32, as
// DepthwiseKernels.forward (bit for bit: no FMA contraction).
extern "C" __global__ void depthwise_forward_f32(const float* x, const float* weight, float* y,
                                                 int n, int c, int h, int w, int k) {
  long long total = (long long)n * c * h * w;
  int p = k / 2;
  RT_FOR_EACH(o, total) {
    int px = (int)(o % w);
    int py = (int)((o / w) % h);
    long long nc = o / ((long long)w * h);
    int ch = (int)(nc % c);
    long long img = nc / c;
    const float* plane = x + nc * h * w;
    const float* taps = weight + (long long)ch * k * k;
    float acc = 0.0f;
    for (int ky = 0; ky < k; ky++) {
      int iy = py + ky - p;
      if (iy < 0 || iy >= h) {
        continue;
      }
      for (int kx = 0; kx < k; kx++) {
        int ix = px + kx - p;
        if (ix >= 0 && ix < w) {
          acc += plane[iy * w + ix] * taps[ky * k + kx];
        }
      }
    }
    y[((img * h + py) * w + px) * c + ch] = acc;
  }
}
RT_KERNEL(depthwise_forward_f32)

// Its input gradient dx[n][ch][iy][ix] from channels-last dy and the flipped taps: a thread per
// input, as DepthwiseKernels.backwardData, numbered channels fastest, so that a warp's 49 reads of
// dy are neighbours (its one write of dx is the strided access).
extern "C" __global__ void depthwise_backward_data_f32(const float* dy, const float* weight,
                                                       float* dx, int n, int c, int h, int w,
                                                       int k) {
  long long total = (long long)n * c * h * w;
  int p = k / 2;
  RT_FOR_EACH(i, total) {
    int ch = (int)(i % c);
    int ix = (int)((i / c) % w);
    int iy = (int)((i / ((long long)c * w)) % h);
    long long img = i / ((long long)c * w * h);
    const float* taps = weight + (long long)ch * k * k;
    float acc = 0.0f;
    for (int ky = 0; ky < k; ky++) {
      int py = iy - ky + p;
      if (py < 0 || py >= h) {
        continue;
      }
      for (int kx = 0; kx < k; kx++) {
        int px = ix - kx + p;
        if (px >= 0 && px < w) {
          acc += dy[((img * h + py) * w + px) * c + ch] * taps[ky * k + kx];
        }
      }
    }
    dx[((img * c + ch) * h + iy) * w + ix] = acc;
  }
}
RT_KERNEL(depthwise_backward_data_f32)

// Its weight gradient for k = 3, 5 or 7, in two launches. First a block per (channel, chunk of
// the batch's positions): each thread takes every RT_BLOCK-th position of the chunk, reads its dy
// once and adds the K x K products with its input window to K x K float sums; the block then adds
// its threads' sums tap by tap in double (a fixed tree) into partials[(ch * K * K + tap) * chunks
// + chunk]. Deterministic: no atomics, the same order every run.
template <int K>
__device__ __forceinline__ void rt_depthwise_weight_partials(const float* x, const float* dy,
                                                             double* partials, int n, int c,
                                                             int h, int w, long long chunk,
                                                             double* scratch) {
  const int p = K / 2;
  int ch = blockIdx.x;
  long long hw = (long long)h * w;
  long long positions = (long long)n * hw;
  long long start = (long long)blockIdx.y * chunk;
  long long end = start + chunk < positions ? start + chunk : positions;
  float acc[K * K];
  for (int t = 0; t < K * K; t++) {
    acc[t] = 0.0f;
  }
  for (long long o = start + threadIdx.x; o < end; o += RT_BLOCK) {
    long long img = o / hw;
    int rest = (int)(o % hw);
    int py = rest / w;
    int px = rest % w;
    float g = dy[((img * h + py) * w + px) * c + ch];
    const float* plane = x + (img * c + ch) * hw;
    for (int ky = 0; ky < K; ky++) {
      int iy = py + ky - p;
      if (iy < 0 || iy >= h) {
        continue;
      }
      for (int kx = 0; kx < K; kx++) {
        int ix = px + kx - p;
        if (ix >= 0 && ix < w) {
          acc[ky * K + kx] += plane[iy * w + ix] * g;
        }
      }
    }
  }
  for (int t = 0; t < K * K; t++) {
    double total = rt_block_sum((double)acc[t], scratch);
    if (threadIdx.x == 0) {
      partials[((long long)ch * K * K + t) * gridDim.y + blockIdx.y] = total;
    }
  }
}

extern "C" __global__ void depthwise_weight_partials_f32(const float* x, const float* dy,
                                                         double* partials, int n, int c, int h,
                                                         int w, int k, long long chunk) {
  __shared__ double scratch[RT_BLOCK];
  if (k == 3) {
    rt_depthwise_weight_partials<3>(x, dy, partials, n, c, h, w, chunk, scratch);
  } else if (k == 5) {
    rt_depthwise_weight_partials<5>(x, dy, partials, n, c, h, w, chunk, scratch);
  } else {
    rt_depthwise_weight_partials<7>(x, dy, partials, n, c, h, w, chunk, scratch);
  }
}
RT_KERNEL_WITH_BARRIERS(depthwise_weight_partials_f32)

// Then dw[t] += the chunks' partial sums of tap t, added in chunk order.
extern "C" __global__ void depthwise_weight_totals_f32(const double* partials, int chunks,
                                                       int taps, float* dw) {
  RT_FOR_EACH(t, taps) {
    double total = 0;
    for (int k = 0; k < chunks; k++) {
      total += partials[t * chunks + k];
    }
    dw[t] = dw[t] + (float)total;
  }
}
RT_KERNEL(depthwise_weight_totals_f32)

// Any other k: a block per (channel, tap), each thread's products over a strided share of the
// batch's positions summed in double, then the block's fixed-order tree, added to dw.
extern "C" __global__ void depthwise_backward_weight_f32(const float* x, const float* dy,
                                                         float* dw, int n, int c, int h, int w,
                                                         int k) {
  __shared__ double scratch[RT_BLOCK];
  int ch = blockIdx.x / (k * k);
  int ky = blockIdx.x % (k * k) / k;
  int kx = blockIdx.x % k;
  int p = k / 2;
  long long hw = (long long)h * w;
  long long positions = (long long)n * hw;
  double partial = 0;
  for (long long o = threadIdx.x; o < positions; o += RT_BLOCK) {
    long long img = o / hw;
    int py = (int)(o % hw) / w;
    int px = (int)(o % hw) % w;
    int iy = py + ky - p;
    int ix = px + kx - p;
    if (iy >= 0 && iy < h && ix >= 0 && ix < w) {
      partial += (double)(x[((img * c + ch) * h + iy) * w + ix] *
                          dy[((img * h + py) * w + px) * c + ch]);
    }
  }
  double total = rt_block_sum(partial, scratch);
  if (threadIdx.x == 0) {
    dw[blockIdx.x] = dw[blockIdx.x] + (float)total;
  }
}
RT_KERNEL_WITH_BARRIERS(depthwise_backward_weight_f32)
