/*
 * HostAdamWKernel: the offloaded optimizer's AdamW over pinned host slabs in one pass. Java's loop
 * keeps fp32 moments at the memory's speed, but the bf16 work (the device-bound copy of the masters
 * and bf16 moments) goes scalar in the JIT, 8x slower; here gcc vectorizes it for AVX-512, AVX2 and
 * baseline x86-64, each call running the best the CPU has. The arithmetic is AdamWMath's, operation for operation and without
 * contraction into FMAs (-ffp-contract=off), so the bits are the Java reference's
 * (HostAdamWTest, every variant the CPU runs).
 */
#include <jni.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/*
 * Each pass is compiled for three instruction sets; every call names the one to use (ISA_BEST: the
 * best this CPU runs, as training calls it), so a test runs each variant the CPU has against the
 * Java loop: a kernel that differed on AVX2 machines only would fail on an AVX-512 one too.
 */
#define ISA_AVX512 0
#define ISA_AVX2 1
#define ISA_BASELINE 2

/* The variant a call asking for {@code isa} gets: it, or the best below it this CPU runs. */
static int usable(int isa) {
  __builtin_cpu_init();
  if (isa <= ISA_AVX512 && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    return ISA_AVX512;
  }
  if (isa <= ISA_AVX2 && __builtin_cpu_supports("avx2")) {
    return ISA_AVX2;
  }
  return ISA_BASELINE;
}

/*
 * AVX-512 with its byte-and-word (BW) and 256-bit (VL) forms, as every AVX-512 server CPU has them
 * (Skylake-SP on, Zen 4 on): without BW gcc keeps the bf16 loops' 16-bit loads and stores, and so
 * the whole loop, at 256 bits, and bf16 moments ran at half the fp32 pass's speed in cache.
 */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define AVX2 __attribute__((target("avx2")))

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

/* STREAM's triad a = b + 3 c: the memory's streaming speed, which the update is measured against. */
static inline __attribute__((always_inline)) void triad_body(float *restrict a,
                                                             const float *restrict b,
                                                             const float *restrict c, int n) {
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

/* bf16 gradients widened into fp32 (exact: the bf16 bits are the float's top half). */
static inline __attribute__((always_inline)) void widen_body(const uint16_t *restrict src,
                                                             float *restrict dst, int n) {
  for (int i = 0; i < n; i++) {
    dst[i] = from_bits((uint32_t)src[i] << 16);
  }
}

#define FP32_PARAMS                                                                          \
  float *restrict p, const float *restrict g, float *restrict m, float *restrict v,          \
      uint16_t *restrict out, int n, float b1, float b2, float eps, float decay,             \
      float step_size, float sqrt_correction
#define FP32_ARGS p, g, m, v, out, n, b1, b2, eps, decay, step_size, sqrt_correction
#define BF16_PARAMS                                                                          \
  float *restrict p, const float *restrict g, uint16_t *restrict m, uint16_t *restrict v,    \
      uint16_t *restrict out, int n, float b1, float b2, float eps, float decay,             \
      float step_size, float sqrt_correction, uint32_t key, uint32_t hi, uint32_t lo
#define BF16_ARGS p, g, m, v, out, n, b1, b2, eps, decay, step_size, sqrt_correction, key, hi, lo

/* One variant of each pass for an instruction set; the copy's loop apart from the one without. */
#define VARIANTS(suffix, target)                                                              \
  target static void fp32_##suffix(FP32_PARAMS) {                                             \
    if (out != NULL) {                                                                        \
      fp32_body(FP32_ARGS, 1);                                                                \
    } else {                                                                                  \
      fp32_body(FP32_ARGS, 0);                                                                \
    }                                                                                         \
  }                                                                                           \
  target static void bf16_state_##suffix(BF16_PARAMS) {                                       \
    if (out != NULL) {                                                                        \
      bf16_state_body(BF16_ARGS, 1);                                                          \
    } else {                                                                                  \
      bf16_state_body(BF16_ARGS, 0);                                                          \
    }                                                                                         \
  }                                                                                           \
  target static void widen_##suffix(const uint16_t *restrict src, float *restrict dst, int n) { \
    widen_body(src, dst, n);                                                                  \
  }                                                                                           \
  target static void triad_##suffix(float *restrict a, const float *restrict b,               \
                                    const float *restrict c, int n) {                         \
    triad_body(a, b, c, n);                                                                   \
  }

VARIANTS(avx512, AVX512)
VARIANTS(avx2, AVX2)
VARIANTS(baseline, )

JNIEXPORT jint JNICALL Java_dev_ramtrain_trainer_offload_HostAdamWKernel_usableIsa(JNIEnv *env,
                                                                                  jclass cls,
                                                                                  jint isa) {
  (void)env;
  (void)cls;
  return usable(isa);
}

JNIEXPORT void JNICALL Java_dev_ramtrain_trainer_offload_HostAdamWKernel_fp32Native(
    JNIEnv *env, jclass cls, jlong pa, jlong ga, jlong ma, jlong va, jlong outa, jint n, jfloat b1,
    jfloat b2, jfloat eps, jfloat decay, jfloat step_size, jfloat sqrt_correction, jint isa) {
  (void)env;
  (void)cls;
  float *p = (float *)(intptr_t)pa;
  const float *g = (const float *)(intptr_t)ga;
  float *m = (float *)(intptr_t)ma;
  float *v = (float *)(intptr_t)va;
  uint16_t *out = (uint16_t *)(intptr_t)outa;
  switch (usable(isa)) {
    case ISA_AVX512:
      fp32_avx512(FP32_ARGS);
      break;
    case ISA_AVX2:
      fp32_avx2(FP32_ARGS);
      break;
    default:
      fp32_baseline(FP32_ARGS);
  }
}

JNIEXPORT void JNICALL Java_dev_ramtrain_trainer_offload_HostAdamWKernel_bf16StateNative(
    JNIEnv *env, jclass cls, jlong pa, jlong ga, jlong ma, jlong va, jlong outa, jint n, jfloat b1,
    jfloat b2, jfloat eps, jfloat decay, jfloat step_size, jfloat sqrt_correction, jint jkey,
    jlong index, jint isa) {
  (void)env;
  (void)cls;
  float *p = (float *)(intptr_t)pa;
  const float *g = (const float *)(intptr_t)ga;
  uint16_t *m = (uint16_t *)(intptr_t)ma;
  uint16_t *v = (uint16_t *)(intptr_t)va;
  uint16_t *out = (uint16_t *)(intptr_t)outa;
  uint32_t key = (uint32_t)jkey;
  uint32_t hi = (uint32_t)((uint64_t)index >> 32);
  uint32_t lo = (uint32_t)index;
  switch (usable(isa)) {
    case ISA_AVX512:
      bf16_state_avx512(BF16_ARGS);
      break;
    case ISA_AVX2:
      bf16_state_avx2(BF16_ARGS);
      break;
    default:
      bf16_state_baseline(BF16_ARGS);
  }
}

JNIEXPORT void JNICALL Java_dev_ramtrain_trainer_offload_HostAdamWKernel_triadNative(
    JNIEnv *env, jclass cls, jlong a, jlong b, jlong c, jint n) {
  (void)env;
  (void)cls;
  float *x = (float *)(intptr_t)a;
  const float *y = (const float *)(intptr_t)b;
  const float *z = (const float *)(intptr_t)c;
  switch (usable(ISA_AVX512)) {
    case ISA_AVX512:
      triad_avx512(x, y, z, n);
      break;
    case ISA_AVX2:
      triad_avx2(x, y, z, n);
      break;
    default:
      triad_baseline(x, y, z, n);
  }
}

JNIEXPORT void JNICALL Java_dev_ramtrain_trainer_offload_HostAdamWKernel_widenNative(
    JNIEnv *env, jclass cls, jlong src, jlong dst, jint n) {
  (void)env;
  (void)cls;
  const uint16_t *x = (const uint16_t *)(intptr_t)src;
  float *y = (float *)(intptr_t)dst;
  switch (usable(ISA_AVX512)) {
    case ISA_AVX512:
      widen_avx512(x, y, n);
      break;
    case ISA_AVX2:
      widen_avx2(x, y, n);
      break;
    default:
      widen_baseline(x, y, n);
  }
}
