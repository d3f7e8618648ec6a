package dev.ramtrain.etl.spark;

import dev.ramtrain.format.ShardStats;
import java.io.Serializable;
import java.util.List;

/**
 * What one shard task produced: the shard's stats, the inputs it skipped, and (in memory mode) the
 * shard's bytes, which stay in the block store of {@code executor}, the executor that made them (a
 * trainer stage places each shard's rank there).
 */
public record ShardResult(
    String split,
    int shard,
    long inputs,
    ShardStats stats,
    List<Reject> rejects,
    byte[] bytes,
    String executor)
    implements Serializable {

  public ShardResult withoutBytes() {
    return new ShardResult(split, shard, inputs, stats, rejects, null, executor);
  }
}
