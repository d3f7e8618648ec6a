package dev.ramtrain.random;

/**
 * The SplitMix64 finalizer (Steele, Lea and Flood, "Fast splittable pseudorandom number
 * generators", 2014): one bijective 64-bit avalanche. Sample ids, shard placement, split
 * assignment, augmentation seeds and the counter-based dropout masks all derive from it, so there
 * is exactly one definition of "mixed" in the project; a CUDA kernel reimplements these three
 * lines.
 */
public final class SplitMix64 {
  /** The golden-ratio increment SplitMix64 adds between outputs. */
  public static final long GOLDEN_GAMMA = 0x9E3779B97F4A7C15L;

  private SplitMix64() {}

  /** Scrambles every bit of {@code z} into every bit of the result. */
  public static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** Output {@code i} of the SplitMix64 stream started at {@code seed}: a pure function of both. */
  public static long at(long seed, long i) {
    return mix(seed + (i + 1) * GOLDEN_GAMMA);
  }
}
