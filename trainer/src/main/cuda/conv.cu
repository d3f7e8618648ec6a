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

// Routes dy to the recorded winners, a thread per plane in output order (overlapping windows
// add in the CPU backend's order, without atomics).
extern "C" __global__ void max_pool_backward_f32(const float* dy, const int* argmax, int planes,
                                                 int hw, int ohw, float* dx) {
  RT_FOR_EACH(nc, planes) {
    float* plane = dx + nc * hw;
    for (int p = 0; p < hw; p++) {
      plane[p] = 0.0f;
    }
    const float* grad = dy + nc * ohw;
    const int* where = argmax + nc * ohw;
    for (int i = 0; i < ohw; i++) {
      plane[where[i]] += grad[i];
    }
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
// input, as DepthwiseKernels.backwardData.
extern "C" __global__ void depthwise_backward_data_f32(const float* dy, const float* weight,
                                                       float* dx, int n, int c, int h, int w,
                                                       int k) {
  long long total = (long long)n * c * h * w;
  int p = k / 2;
  RT_FOR_EACH(i, total) {
    int ix = (int)(i % w);
    int iy = (int)((i / w) % h);
    long long nc = i / ((long long)w * h);
    int ch = (int)(nc % c);
    long long img = nc / c;
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
    dx[i] = acc;
  }
}
RT_KERNEL(depthwise_backward_data_f32)

// Its weight gradient: a block per (channel, tap), each thread's products over a strided share
// of the batch's positions summed in double, then the block's fixed-order tree (deterministic:
// no atomics), added to dw.
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
