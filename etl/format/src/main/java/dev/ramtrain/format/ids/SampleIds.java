package dev.ramtrain.format.ids;

import dev.ramtrain.random.Seeds;
import dev.ramtrain.random.SplitMix64;
import java.nio.charset.StandardCharsets;

/**
 * Stable 63-bit sample ids, the shards' id column. Ids depend only on the sample key, never on
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

  /** The id of augmented copy {@code copy} of sample {@code id} (copy 0 is the sample itself). */
  public static long copyId(long id, int copy) {
    return copy == 0 ? id : Seeds.mix(id, copy) & Long.MAX_VALUE;
  }
}
