/*
 * HostAdamWKernel: the offloaded optimizer's AdamW over pinned host slabs in one pass. Java's loop
 * keeps fp32 moments at the memory's speed, but the bf16 work (the device-bound copy of the masters
 * and bf16 moments) goes scalar in the JIT, 8x slower; here gcc vectorizes it for the best ISA the
 * CPU has (target_clones). The arithmetic is AdamWMath's, operation for operation and without
 * contraction into FMAs (-ffp-contract=off), so the bits are the Java reference's
 * (HostAdamWKernelTest).
 */
#include <jni.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

static inline float from_bits(uint32_t b) {
  float x;
  memcpy(&x, &b, 4);
  return x;
}

static inline uint32_t to_bits(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}

/* Bf16.fromFloat: to nearest, ties to even; NaN stays a quiet NaN. */
static inline uint16_t bf16_nearest(float x) {
  uint32_t b = to_bits(x);
  uint32_t nan = (b >> 16) | 0x40u;
  uint32_t rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
  return (uint16_t)((b & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded); /* a select, no branch */
}

/* Stochastic rounding: up with the probability of the dropped bits (r: 16 random bits). */
static inline uint16_t bf16_stochastic(float x, uint32_t r) {
  uint32_t b = to_bits(x);
  uint32_t nan = (b >> 16) | 0x40u;
  return (uint16_t)((b & 0x7FFFFFFFu) > 0x7F800000u ? nan : (b + r) >> 16);
}

/* StochasticBits.of: 32 random bits of element (hi, lo) under the step's key (murmur3's fmix32). */
static inline uint32_t random_bits(uint32_t key, uint32_t hi, uint32_t lo) {
  uint32_t h = (lo * 0x9E3779B9u) ^ key ^ (hi * 0x27D4EB2Fu);
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

/* AdamW over fp32 moments; the weights' bf16 copy written to {@code out} where {@code narrow}. */
static inline __attribute__((always_inline)) void fp32_body(
    float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
    uint16_t *restrict out, int n, float b1, float b2, float eps, float decay, float step_size,
    float sqrt_correction, int narrow) {
  float c1 = 1 - b1;
  float c2 = 1 - b2;
  for (int i = 0; i < n; i++) {
    float gi = g[i];
    float mi = b1 * m[i] + c1 * gi;
    float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / sqrt_correction + eps;
    float pi = p[i] * decay - step_size * mi / denom;
    p[i] = pi;
    if (narrow) {
      out[i] = bf16_nearest(pi);
    }
  }
}

CLONES static void fp32(float *restrict p, const float *restrict g, float *restrict m,
                        float *restrict v, uint16_t *restrict out, int n, float b1, float b2,
                        float eps, float decay, float step_size, float sqrt_correction) {
  if (out != NULL) {
    fp32_body(p, g, m, v, out, n, b1, b2, eps, decay, step_size, sqrt_correction, 1);
  } else {
    fp32_body(p, g, m, v, out, n, b1, b2, eps, decay, step_size, sqrt_correction, 0);
  }
}

/* STREAM's triad a = b + 3 c: the memory's streaming speed, which the update is measured against. */
CLONES static void triad(float *restrict a, const float *restrict b, const float *restrict c,
                         int n) {
  for (int i = 0; i < n; i++) {
    a[i] = b[i] + 3.0f * c[i];
  }
}

/* One element of AdamW over bf16 moments; the copy {@code out} written where {@code narrow}. */
static inline __attribute__((always_inline)) void bf16_state_body(
    float *restrict p, const float *restrict g, uint16_t *restrict m, uint16_t *restrict v,
    uint16_t *restrict out, int n, float b1, float b2, float eps, float decay, float step_size,
    float sqrt_correction, uint32_t key, uint32_t hi, uint32_t lo, int narrow) {
  float c1 = 1 - b1;
  float c2 = 1 - b2;
  for (int i = 0; i < n; i++) {
    float gi = g[i];
    float mi = b1 * from_bits((uint32_t)m[i] << 16) + c1 * gi;
    float vi = b2 * from_bits((uint32_t)v[i] << 16) + c2 * gi * gi;
    uint32_t r = random_bits(key, hi, lo + (uint32_t)i);
    m[i] = bf16_stochastic(mi, r & 0xFFFFu);
    v[i] = bf16_stochastic(vi, r >> 16);
    float denom = sqrtf(vi) / sqrt_correction + eps;
    float pi = p[i] * decay - step_size * mi / denom;
    p[i] = pi;
    if (narrow) {
      out[i] = bf16_nearest(pi);
    }
  }
}

CLONES static void bf16_state(float *restrict p, const float *restrict g, uint16_t *restrict m,
                              uint16_t *restrict v, uint16_t *restrict out, int n, float b1,
                              float b2, float eps, float decay, float step_size,
                              float sqrt_correction, uint32_t key, uint32_t hi, uint32_t lo) {
  if (out != NULL) {
    bf16_state_body(p, g, m, v, out, n, b1, b2, eps, decay, step_size, sqrt_correction, key, hi,
                    lo, 1);
  } else {
    bf16_state_body(p, g, m, v, out, n, b1, b2, eps, decay, step_size, sqrt_correction, key, hi,
                    lo, 0);
  }
}

JNIEXPORT void JNICALL Java_dev_ramtrain_trainer_offload_HostAdamWKernel_fp32Native(
    JNIEnv *env, jclass cls, jlong p, jlong g, jlong m, jlong v, jlong out, jint n, jfloat b1,
    jfloat b2, jfloat eps, jfloat decay, jfloat step_size, jfloat sqrt_correction) {
  (void)env;
  (void)cls;
  fp32((float *)(intptr_t)p, (const float *)(intptr_t)g, (float *)(intptr_t)m,
       (float *)(intptr_t)v, (uint16_t *)(intptr_t)out, n, b1, b2, eps, decay, step_size,
       sqrt_correction);
}

JNIEXPORT void JNICALL Java_dev_ramtrain_trainer_offload_HostAdamWKernel_bf16StateNative(
    JNIEnv *env, jclass cls, jlong p, jlong g, jlong m, jlong v, jlong out, jint n, jfloat b1,
    jfloat b2, jfloat eps, jfloat decay, jfloat step_size, jfloat sqrt_correction, jint key,
    jlong index) {
  (void)env;
  (void)cls;
  bf16_state((float *)(intptr_t)p, (const float *)(intptr_t)g, (uint16_t *)(intptr_t)m,
             (uint16_t *)(intptr_t)v, (uint16_t *)(intptr_t)out, n, b1, b2, eps, decay,
             step_size, sqrt_correction, (uint32_t)key, (uint32_t)((uint64_t)index >> 32),
             (uint32_t)index);
}

JNIEXPORT void JNICALL Java_dev_ramtrain_trainer_offload_HostAdamWKernel_triadNative(
    JNIEnv *env, jclass cls, jlong a, jlong b, jlong c, jint n) {
  (void)env;
  (void)cls;
  triad((float *)(intptr_t)a, (const float *)(intptr_t)b, (const float *)(intptr_t)c, n);
}
