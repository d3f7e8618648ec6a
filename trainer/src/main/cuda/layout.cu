// Strided copies: transposes, slices and broadcasts between activation layouts (StridedCopy). One
// thread per (r, j, k), walking i in order, so an accumulating copy onto a destination shared by
// every i sums them in the CPU backend's order.
#include "ramtrain.cuh"

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
