package dev.ramtrain.random;

/**
 * Seeds derived from several values (a run's seed, an epoch, a sample id, a layer's index): each
 * stream of random numbers in ramtrain is keyed by what it is for, never by thread timing or
 * partitioning, so a run repeats exactly.
 */
public final class Seeds {
  private Seeds() {}

  /** Mixes several values into one well-distributed 64-bit seed. */
  public static long mix(long... values) {
    long h = SplitMix64.GOLDEN_GAMMA;
    for (long v : values) {
      h = SplitMix64.mix(h ^ SplitMix64.mix(v + SplitMix64.GOLDEN_GAMMA));
    }
    return h;
  }
}
