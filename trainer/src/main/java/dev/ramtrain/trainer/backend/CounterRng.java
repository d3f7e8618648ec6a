package dev.ramtrain.trainer.backend;

/**
 * A counter-based random number: the value for (seed, i) is a pure function of both, so a GPU
 * thread, a CPU chunk or a test computes the same draw for element i without shared state (the idea
 * of Philox in cuRAND, here with the SplitMix64 finalizer, which is cheap on every device).
 */
public final class CounterRng {
  private CounterRng() {}

  /** A uniform float in [0, 1) with 24 random bits. */
  public static float uniform(long seed, long i) {
    long z = seed + (i + 1) * 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    z ^= z >>> 31;
    return (z >>> 40) * 0x1.0p-24f;
  }
}
