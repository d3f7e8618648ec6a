package dev.ramtrain.etl.source;

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
    return avalanche(h) & Long.MAX_VALUE;
  }

  /** Mixes several values into one well-distributed 64-bit seed. */
  public static long mix(long... values) {
    long h = 0x9E3779B97F4A7C15L;
    for (long v : values) {
      h = avalanche(h ^ avalanche(v + 0x9E3779B97F4A7C15L));
    }
    return h;
  }

  /** The id of augmented copy {@code copy} of sample {@code id} (copy 0 is the sample itself). */
  public static long copyId(long id, int copy) {
    return copy == 0 ? id : mix(id, copy) & Long.MAX_VALUE;
  }

  private static long avalanche(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
