package dev.ramtrain.trainer.run;

import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.HostMemory;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.offload.PlacementPlan;

/**
 * The host memory a run's shards take, said at start: windows of shards are memory the loaders own,
 * so they must fit in what this rank may take (checked before the first epoch, not found out by the
 * kernel); shards opened all at once are mapped, and a split larger than the memory available would
 * be read from disk at random every epoch (said, with the setting that avoids it).
 */
final class ShardMemory {
  private ShardMemory() {}

  /** Checks the windows fit, and says what the shards take where {@code speak} (rank 0). */
  static void report(
      DataLoader train, DataLoader val, int shardWindow, HostLimit limit, boolean speak) {
    long machine = HostMemory.availableBytes();
    long host = limit.cap(machine);
    long take = train.shardMemoryBytes() + val.shardMemoryBytes();
    String has =
        limit.binds(machine)
            ? "this rank may take " + limit.source()
            : "the host has " + PlacementPlan.bytes(host) + " available";
    if (shardWindow > 0) {
      if (take > host) {
        throw new ConfigException(
            String.format(
                "ramtrain.train.shard-window = %d: the train and val loaders keep two windows of"
                    + " shards each, %s here, and %s; lower it",
                shardWindow, PlacementPlan.bytes(take), has));
      }
      if (!speak) {
        return;
      }
      System.out.printf(
          "data: shards read %d at a time, %s of memory at most for train and val (%s)%n",
          shardWindow, PlacementPlan.bytes(take), has);
    } else if (take > host && speak) {
      System.out.printf(
          "data: the shards take %s and %s: epochs will read them from disk at random;"
              + " ramtrain.train.shard-window = N reads N shards at a time%n",
          PlacementPlan.bytes(take), has);
    }
  }
}
