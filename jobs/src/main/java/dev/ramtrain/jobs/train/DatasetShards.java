package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.trainer.backend.HostMemory;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.data.ShardSource;
import dev.ramtrain.trainer.offload.PlacementPlan;
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
    List<Manifest.Shard> mine = new ArrayList<>();
    List<Manifest.Shard> all = m.split(split).shards();
    for (int i = 0; i < all.size(); i++) {
      if (which.test(i)) {
        mine.add(all.get(i));
      }
    }
    int window = windowShards == 0 ? windowForRemote(dataset, split, mine) : windowShards;
    if (window == 0) {
      return new ShardSet(m.image().shape(), m.classes(), dataset.openShards(split, which));
    }
    return ShardSet.windowed(new Source(dataset, mine), window);
  }

  /**
   * Opened, a remote dataset's shards are read whole into memory: where they would take more than
   * half of what the machine has, they are read a window at a time instead, and the run says so,
   * rather than run out of memory. 0: open them all.
   */
  private static int windowForRemote(Dataset dataset, String split, List<Manifest.Shard> shards) {
    if (dataset.local()) {
      return 0; // mapped: the page cache holds what it can (ShardMemory says when it cannot)
    }
    long available = HostMemory.availableBytes();
    int window = remoteWindow(shards, available);
    if (window > 0) {
      System.out.printf(
          "data: the %s split's %s of shards on %s would take more than half the %s this"
              + " machine has: reading it %d shards at a time (ramtrain.train.shard-window)%n",
          split,
          PlacementPlan.bytes(shards.stream().mapToLong(Manifest.Shard::bytes).sum()),
          dataset.location(),
          PlacementPlan.bytes(available),
          window);
    }
    return window;
  }

  /**
   * The window for remote {@code shards} on a machine with {@code available} bytes: 0 (read them
   * all) when they take at most half of it, else as many shards as keep two windows of the largest
   * within a quarter of it, at least one.
   */
  static int remoteWindow(List<Manifest.Shard> shards, long available) {
    long total = shards.stream().mapToLong(Manifest.Shard::bytes).sum();
    if (shards.isEmpty() || total <= available / 2) {
      return 0;
    }
    long largest = shards.stream().mapToLong(Manifest.Shard::bytes).max().orElse(1);
    return (int) Math.max(1, Math.min(shards.size(), available / 4 / (2 * largest)));
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
