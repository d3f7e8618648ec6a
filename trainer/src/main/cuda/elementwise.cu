// Elementwise kernels: one grid-stride loop each, the arithmetic of the CPU backend's CpuKernels
// (compiled without FMA contraction, so results agree bit for bit where the math is the same).
#include "ramtrain.cuh"

extern "C" __global__ void fill_f32(float* x, long long n, float value) {
  RT_FOR_EACH(i, n) { x[i] = value; }
}
RT_KERNEL(fill_f32)

extern "C" __global__ void add_f32(const float* a, const float* b, float* out, long long n) {
  RT_FOR_EACH(i, n) { out[i] = a[i] + b[i]; }
}
RT_KERNEL(add_f32)

extern "C" __global__ void multiply_f32(const float* a, const float* b, float* out, long long n) {
  RT_FOR_EACH(i, n) { out[i] = a[i] * b[i]; }
}
RT_KERNEL(multiply_f32)

// target += weight * (source - target) as one fused multiply-add: Java's Math.fma, bit for bit.
extern "C" __global__ void lerp_f32(float* target, const float* source, long long n, float weight) {
  RT_FOR_EACH(i, n) {
    float t = target[i];
    target[i] = fmaf(weight, source[i] - t, t);
  }
}
RT_KERNEL(lerp_f32)

// Java's Math.max(x, 0f): NaN stays NaN, -0 becomes +0.
extern "C" __global__ void relu_f32(const float* x, float* y, long long n) {
  RT_FOR_EACH(i, n) {
    float v = x[i];
    y[i] = v != v ? v : (v > 0.0f ? v : 0.0f);
  }
}
RT_KERNEL(relu_f32)

// dx = x > 0 ? dy : 0 by the CPU backend's bit test: a zero of either sign or a negative x
// passes nothing (the top bit of (bits - 1) | bits is set), a positive NaN passes dy.
extern "C" __global__ void relu_backward_f32(const float* x, const float* dy, float* dx,
                                             long long n) {
  RT_FOR_EACH(i, n) {
    unsigned int bits = __float_as_uint(x[i]);
    unsigned int keep = (((bits - 1u) | bits) >> 31) ? 0u : 0xFFFFFFFFu;
    dx[i] = __uint_as_float(__float_as_uint(dy[i]) & keep);
  }
}
RT_KERNEL(relu_backward_f32)

// erf to 1.2e-7 (Press et al.'s Chebyshev fit of erfc), in double: the CPU backend's formula, so
// both backends' GELU agree to the last bit or two rather than to the libraries' erf.
__device__ __forceinline__ double rt_erf(double x) {
  double z = fabs(x);
  double t = 1.0 / (1.0 + 0.5 * z);
  double erfc =
      t * exp(-z * z - 1.26551223 +
              t * (1.00002368 +
                   t * (0.37409196 +
                        t * (0.09678418 +
                             t * (-0.18628806 +
                                  t * (0.27886807 +
                                       t * (-1.13520398 +
                                            t * (1.48851587 +
                                                 t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? 1.0 - erfc : erfc - 1.0;
}

extern "C" __global__ void gelu_f32(const float* x, float* y, long long n) {
  RT_FOR_EACH(i, n) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + rt_erf(v * 0.70710678118654752440)));
  }
}
RT_KERNEL(gelu_f32)

extern "C" __global__ void gelu_backward_f32(const float* x, const float* dy, float* dx,
                                             long long n) {
  RT_FOR_EACH(i, n) {
    double v = x[i];
    double cdf = 0.5 * (1.0 + rt_erf(v * 0.70710678118654752440));
    double pdf = 0.39894228040143267794 * exp(-0.5 * v * v);
    dx[i] = (float)(dy[i] * (cdf + v * pdf));
  }
}
RT_KERNEL(gelu_backward_f32)

// Inverted dropout's mask from the counter RNG: the CPU backend's mask, bit for bit.
extern "C" __global__ void dropout_mask_f32(float p, float keep, unsigned long long seed,
                                            float* mask, long long n) {
  RT_FOR_EACH(i, n) { mask[i] = rt_uniform(seed, (unsigned long long)i) < p ? 0.0f : keep; }
}
RT_KERNEL(dropout_mask_f32)

extern "C" __global__ void f32_to_bf16(const float* src, unsigned short* dst, long long n) {
  RT_FOR_EACH(i, n) { dst[i] = rt_f32_to_bf16(src[i]); }
}
RT_KERNEL(f32_to_bf16)

extern "C" __global__ void bf16_to_f32(const unsigned short* src, float* dst, long long n) {
  RT_FOR_EACH(i, n) { dst[i] = rt_bf16_to_f32(src[i]); }
}
RT_KERNEL(bf16_to_f32)
