package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.data.ShardSource;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntPredicate;

/**
 * Where a committed dataset directory meets the trainer: one split's shards for a loader, opened
 * (and checksummed) all at once, or, with {@code ramtrain.train.shard-window} set, read a window at
 * a time from wherever the dataset lives (a local disk or a Hadoop filesystem: streamed shard by
 * shard, never copied whole).
 */
public final class DatasetShards {
  private DatasetShards() {}

  /** Opens (and checksums) every shard of {@code split}; the caller closes the set. */
  public static ShardSet open(Dataset dataset, String split) throws IOException {
    return open(dataset, split, shard -> true, 0);
  }

  /**
   * The shards of {@code split} whose index in the manifest {@code which} accepts (a rank's own):
   * opened when {@code windowShards} is 0, else read {@code windowShards} at a time.
   */
  public static ShardSet open(Dataset dataset, String split, IntPredicate which, int windowShards)
      throws IOException {
    Manifest m = dataset.manifest();
    if (windowShards == 0) {
      return new ShardSet(m.image().shape(), m.classes(), dataset.openShards(split, which));
    }
    List<Manifest.Shard> mine = new ArrayList<>();
    List<Manifest.Shard> all = m.split(split).shards();
    for (int i = 0; i < all.size(); i++) {
      if (which.test(i)) {
        mine.add(all.get(i));
      }
    }
    return ShardSet.windowed(new Source(dataset, mine), windowShards);
  }

  /** A dataset's shards read on demand, checked against the manifest as they are read. */
  private record Source(Dataset dataset, List<Manifest.Shard> shards) implements ShardSource {
    @Override
    public ShardSchema schema() {
      return dataset.manifest().shardSchema();
    }

    @Override
    public int count() {
      return shards.size();
    }

    @Override
    public long rows(int shard) {
      return shards.get(shard).rows();
    }

    @Override
    public long bytes(int shard) {
      return shards.get(shard).bytes();
    }

    @Override
    public String name(int shard) {
      return dataset.location() + "/" + shards.get(shard).file();
    }

    @Override
    public ShardReader read(int shard, ByteBuffer into) throws IOException {
      return dataset.readShard(shards.get(shard), into);
    }
  }
}
