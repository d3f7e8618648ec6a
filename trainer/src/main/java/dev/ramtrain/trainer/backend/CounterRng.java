package dev.ramtrain.trainer.backend;

import dev.ramtrain.random.SplitMix64;

/**
 * A counter-based random number: the value for (seed, i) is a pure function of both, so a GPU
 * thread, a CPU chunk or a test computes the same draw for element i without shared state (the idea
 * of Philox in cuRAND, here with the SplitMix64 finalizer, which is cheap on every device).
 */
public final class CounterRng {
  private CounterRng() {}

  /** A uniform float in [0, 1) with 24 random bits. */
  public static float uniform(long seed, long i) {
    return (SplitMix64.at(seed, i) >>> 40) * 0x1.0p-24f;
  }
}
