package dev.ramtrain.etl.spark;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.random.Seeds;
import java.io.Serializable;
import java.util.Map;

/**
 * How many shards each split gets and which shard a sample lands in. Partition p < trainShards is
 * train shard p; the rest are val shards.
 */
record ShardPlan(int trainShards, int valShards, double valFraction, long seed)
    implements Serializable {

  static ShardPlan of(
      Map<String, Long> inputsBySplit, PreprocessSpec o, int outputsPerSample, int imageBytes) {
    return new ShardPlan(
        shards(inputsBySplit.getOrDefault(Manifest.TRAIN, 0L), o, outputsPerSample, imageBytes),
        shards(inputsBySplit.getOrDefault(Manifest.VAL, 0L), o, outputsPerSample, imageBytes),
        o.valFraction(),
        o.seed());
  }

  private static int shards(long inputs, PreprocessSpec o, int outputsPerSample, int imageBytes) {
    if (inputs == 0) {
      return 0;
    }
    double bytes = (double) inputs * outputsPerSample * imageBytes;
    if (o.shardsPerSplit() > 0) {
      if (bytes / o.shardsPerSplit() > PreprocessSpec.MAX_SHARD_BYTES) {
        throw new PreprocessException(
            String.format(
                "ramtrain.etl.shards=%d would make shards of about %.1f GiB; shards must stay under"
                    + " 1 GiB (they are memory-mapped whole): use more shards, or shards=0",
                o.shardsPerSplit(), bytes / o.shardsPerSplit() / (1L << 30)));
      }
      return o.shardsPerSplit();
    }
    // One task writes one shard: a floor on the count keeps every core decoding on small datasets.
    long bySize = (long) Math.ceil(bytes / o.shardTargetBytes());
    return (int) Math.min(inputs, Math.max(bySize, o.minShardsPerSplit()));
  }

  int partitions() {
    return trainShards + valShards;
  }

  /** The split of a sample: the source's own, else val for a {@code valFraction} of key hashes. */
  String split(String sourceSplit, long id) {
    if (sourceSplit != null) {
      return sourceSplit;
    }
    // Independent of the seed, so changing the seed reshuffles but never moves samples across
    // splits.
    double u = (Seeds.mix(id, 0x5EED) >>> 11) * 0x1.0p-53;
    return u < valFraction ? Manifest.VAL : Manifest.TRAIN;
  }

  /** The slot of a sample, or null when its split has no shards (an empty split). */
  ShardSlot slot(String split, long id) {
    boolean val = Manifest.VAL.equals(split);
    int shards = val ? valShards : trainShards;
    if (shards == 0) {
      return null;
    }
    int shard = (int) Math.floorMod(Seeds.mix(seed, id), (long) shards);
    return new ShardSlot(val ? trainShards + shard : shard, Seeds.mix(seed, id, 1), id);
  }

  String splitOf(int partition) {
    return partition < trainShards ? Manifest.TRAIN : Manifest.VAL;
  }

  int shardOf(int partition) {
    return partition < trainShards ? partition : partition - trainShards;
  }
}
