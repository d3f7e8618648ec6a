package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.spark.ShardResult;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardStats;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class ShardAssignmentTest {
  private static ShardResult shard(String split, int n, long rows, String executor) {
    return new ShardResult(
        split,
        n,
        rows,
        new ShardStats(rows, rows * 10, 0, List.of(rows)),
        List.of(),
        null,
        executor);
  }

  @Test
  void eachExecutorsShardsGoToOneRankWhenTheyAreBalanced() {
    List<ShardResult> shards = new ArrayList<>();
    // Executors "2" and "10": number order, so "2" is rank 0 and "10" rank 1.
    for (int i = 0; i < 4; i++) {
      shards.add(shard(Manifest.TRAIN, i, 100, i % 2 == 0 ? "10" : "2"));
    }
    shards.add(shard(Manifest.VAL, 0, 30, "2"));
    shards.add(shard(Manifest.VAL, 1, 30, "10"));
    ShardAssignment a = ShardAssignment.of(shards, 2);
    for (ShardResult s : shards) {
      assertEquals(s.executor().equals("2") ? 0 : 1, a.rankOf(s), ShardAssignment.key(s));
    }
    assertEquals(0, a.moved());
    assertEquals(200, a.rows(Manifest.TRAIN, 0));
    assertEquals(30, a.rows(Manifest.VAL, 1));
    assertEquals(200, a.trainPerEpoch(false));
  }

  @Test
  void shardsMoveFromTheFullestRankWhileThatNarrowsTheGap() {
    List<ShardResult> shards = new ArrayList<>();
    // One executor cached everything (local mode), three ranks.
    long[] rows = {100, 100, 100, 100, 100, 40};
    for (int i = 0; i < rows.length; i++) {
      shards.add(shard(Manifest.TRAIN, i, rows[i], "driver"));
    }
    shards.add(shard(Manifest.TRAIN, 6, 0, "driver")); // every input rejected: nobody reads it
    shards.add(shard(Manifest.VAL, 0, 50, "driver"));
    ShardAssignment a = ShardAssignment.of(shards, 3);
    long total = 0;
    long fewest = Long.MAX_VALUE;
    long most = 0;
    for (int r = 0; r < 3; r++) {
      long n = a.rows(Manifest.TRAIN, r);
      total += n;
      fewest = Math.min(fewest, n);
      most = Math.max(most, n);
    }
    assertEquals(540, total, "every sample on one rank");
    assertTrue(
        most - fewest <= 100, "no single move narrows the gap further: " + most + " " + fewest);
    assertEquals(fewest, a.trainPerEpoch(false));
    assertEquals(most, a.trainPerEpoch(true));
    assertEquals(-1, a.rankOf(shards.get(6)));
    assertEquals(50, a.rows(Manifest.VAL, 0) + a.rows(Manifest.VAL, 1) + a.rows(Manifest.VAL, 2));
    assertTrue(a.moved() >= 3, "shards left the only executor's rank: " + a.moved());
  }

  @Test
  void moreExecutorsThanRanksShareRanksInTurn() {
    List<ShardResult> shards = new ArrayList<>();
    for (int e = 0; e < 4; e++) {
      shards.add(shard(Manifest.TRAIN, e, 100, String.valueOf(e)));
    }
    ShardAssignment a = ShardAssignment.of(shards, 2);
    assertEquals(0, a.rankOf(shards.get(0)));
    assertEquals(1, a.rankOf(shards.get(1)));
    assertEquals(0, a.rankOf(shards.get(2)));
    assertEquals(1, a.rankOf(shards.get(3)));
    assertEquals(0, a.moved());
  }

  /**
   * Two executors as two nodes of two devices (rank r on node r mod 2): each executor's shards stay
   * on its node, split over its two devices, none moved; an executor holding more than its node's
   * share gives whole shards to the other node, and only those count as moved.
   */
  @Test
  void aNodesShardsAreSplitOverItsDevicesBeforeAnyLeavesIt() {
    List<ShardResult> even = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      even.add(shard(Manifest.TRAIN, i, 100, i < 4 ? "1" : "2"));
    }
    ShardAssignment a = ShardAssignment.of(even, 4, 2);
    for (ShardResult s : even) {
      assertEquals(s.executor().equals("1") ? 0 : 1, a.rankOf(s) % 2, ShardAssignment.key(s));
    }
    for (int r = 0; r < 4; r++) {
      assertEquals(200, a.rows(Manifest.TRAIN, r), "rank " + r);
    }
    assertEquals(0, a.moved());

    List<ShardResult> uneven = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      uneven.add(shard(Manifest.TRAIN, i, 100, i < 6 ? "1" : "2"));
    }
    ShardAssignment b = ShardAssignment.of(uneven, 4, 2);
    for (int r = 0; r < 4; r++) {
      assertEquals(200, b.rows(Manifest.TRAIN, r), "rank " + r);
    }
    long left =
        uneven.stream().filter(s -> s.executor().equals("1") && b.rankOf(s) % 2 == 1).count();
    assertEquals(2, left, "two of executor 1's six shards went to node 1");
    assertEquals(left, b.moved());
  }
}
