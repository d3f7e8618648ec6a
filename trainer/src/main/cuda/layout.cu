// Strided copies: transposes, slices and broadcasts between activation layouts (StridedCopy).
#include "ramtrain.cuh"

// The accumulating copy: one thread per (r, j, k), walking i in order, so a destination shared by
// every i (a broadcast's gradient) sums them in the CPU backend's order.
extern "C" __global__ void strided_copy_f32(const float* src, long long s0, long long s1,
                                            long long s2, float* dst, long long d0, long long d1,
                                            long long d2, int n0, int n1, int n2,
                                            int accumulate, int times, long long src_step,
                                            long long dst_step) {
  long long inner = (long long)n1 * n2;
  long long total = inner * times;
  RT_FOR_EACH(t, total) {
    long long r = t / inner;
    long long j = t % inner / n2;
    long long k = t % n2;
    const float* from = src + r * src_step + j * s1 + k * s2;
    float* to = dst + r * dst_step + j * d1 + k * d2;
    for (long long i = 0; i < n0; i++) {
      float v = from[i * s0];
      to[i * d0] = accumulate ? to[i * d0] + v : v;
    }
  }
}
RT_KERNEL(strided_copy_f32)

// A plain copy (no accumulation, so no order to keep): a thread per element (r, i, j, k), k
// fastest, so a broadcast over i (layer scale's factors to every row) runs over every thread
// instead of one per (j, k).
extern "C" __global__ void strided_assign_f32(const float* src, long long s0, long long s1,
                                              long long s2, float* dst, long long d0,
                                              long long d1, long long d2, int n0, int n1, int n2,
                                              int times, long long src_step, long long dst_step) {
  long long total = (long long)times * n0 * n1 * n2;
  RT_FOR_EACH(t, total) {
    long long k = t % n2;
    long long j = t / n2 % n1;
    long long i = t / ((long long)n1 * n2) % n0;
    long long r = t / ((long long)n0 * n1 * n2);
    dst[r * dst_step + i * d0 + j * d1 + k * d2] = src[r * src_step + i * s0 + j * s1 + k * s2];
  }
}
RT_KERNEL(strided_assign_f32)

// A plain copy that transposes two axes, a (contiguous in src) and b (contiguous in dst), such as
// NCHW planes to channels-last rows: 32 x 32 tiles through shared memory, so both the reads and the
// writes of a warp touch neighbouring addresses. The outer index o = r * n0 + i runs along the
// grid's z.
#define RT_TILE 32
#define RT_TILE_ROWS 8
extern "C" __global__ void transpose_tiles_f32(const float* src, long long sa, long long sb,
                                               float* dst, long long da, long long db, int na,
                                               int nb, long long s0, long long d0, int n0,
                                               int times, long long src_step,
                                               long long dst_step) {
  __shared__ float tile[RT_TILE][RT_TILE + 1];  // [b][a], padded against bank conflicts
  int a0 = blockIdx.x * RT_TILE;
  int b0 = blockIdx.y * RT_TILE;
  long long outer = (long long)n0 * times;
  for (long long o = blockIdx.z; o < outer; o += gridDim.z) {
    const float* from = src + (o / n0) * src_step + (o % n0) * s0;
    float* to = dst + (o / n0) * dst_step + (o % n0) * d0;
    for (int y = threadIdx.y; y < RT_TILE; y += RT_TILE_ROWS) {
      int a = a0 + threadIdx.x;
      int b = b0 + y;
      if (a < na && b < nb) {
        tile[y][threadIdx.x] = from[a * sa + b * sb];
      }
    }
    __syncthreads();
    for (int y = threadIdx.y; y < RT_TILE; y += RT_TILE_ROWS) {
      int a = a0 + y;
      int b = b0 + threadIdx.x;
      if (a < na && b < nb) {
        to[a * da + b * db] = tile[threadIdx.x][y];
      }
    }
    __syncthreads();
  }
}
RT_KERNEL_WITH_BARRIERS(transpose_tiles_f32)
