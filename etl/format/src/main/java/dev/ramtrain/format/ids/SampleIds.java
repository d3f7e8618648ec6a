package dev.ramtrain.format.ids;

import java.nio.charset.StandardCharsets;

/**
 * Stable 63-bit sample ids and seed mixing. Ids depend only on the sample key, never on
 * partitioning or thread timing, so splits, shard placement and random augmentation are
 * reproducible.
 */
public final class SampleIds {
  private SampleIds() {}

  /** FNV-1a over the key's UTF-8 bytes, finished with a SplitMix64 avalanche; never negative. */
  public static long of(String key) {
    long h = 0xcbf29ce484222325L;
    for (byte b : key.getBytes(StandardCharsets.UTF_8)) {
      h ^= b & 0xFF;
      h *= 0x100000001b3L;
    }
    return SplitMix64.mix(h) & Long.MAX_VALUE;
  }

  /** Mixes several values into one well-distributed 64-bit seed. */
  public static long mix(long... values) {
    long h = SplitMix64.GOLDEN_GAMMA;
    for (long v : values) {
      h = SplitMix64.mix(h ^ SplitMix64.mix(v + SplitMix64.GOLDEN_GAMMA));
    }
    return h;
  }

  /** The id of augmented copy {@code copy} of sample {@code id} (copy 0 is the sample itself). */
  public static long copyId(long id, int copy) {
    return copy == 0 ? id : mix(id, copy) & Long.MAX_VALUE;
  }
}
