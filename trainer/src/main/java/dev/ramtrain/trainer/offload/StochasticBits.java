package dev.ramtrain.trainer.offload;

/**
 * Stochastic rounding to bf16 and the random bits it takes: a counter-based hash of the element's
 * index under a key per step and run (murmur3's finalizer), so an element's rounding is the same
 * whichever thread, chunk or ZeRO share updates it, and a resumed run draws what it would have. The
 * native kernel ({@code host_adamw.c}) computes the same bits.
 */
final class StochasticBits {
  private StochasticBits() {}

  /** The key of {@code step} (1-based) of the run seeded {@code seed}. */
  static int key(long seed, int step) {
    return mix(mix((int) seed ^ (int) (seed >>> 32)) + step);
  }

  /** 32 random bits of element {@code index} under {@code key}. */
  static int of(int key, long index) {
    return mix(((int) index * 0x9E3779B9) ^ key ^ ((int) (index >>> 32) * 0x27D4EB2F));
  }

  /**
   * {@code x} rounded to bf16 up (away from zero) with the probability of the 16 bits it drops:
   * {@code r16} uniform in [0, 65536) makes the rounding unbiased. NaN stays a quiet NaN.
   */
  static short round(float x, int r16) {
    int bits = Float.floatToRawIntBits(x);
    if ((bits & 0x7FFFFFFF) > 0x7F800000) {
      return (short) ((bits >>> 16) | 0x0040);
    }
    return (short) ((bits + r16) >>> 16);
  }

  private static int mix(int h) {
    h ^= h >>> 16;
    h *= 0x85EBCA6B;
    h ^= h >>> 13;
    h *= 0xC2B2AE35;
    h ^= h >>> 16;
    return h;
  }
}
