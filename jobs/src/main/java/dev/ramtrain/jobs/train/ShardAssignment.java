package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.spark.ShardResult;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardStats;
import dev.ramtrain.settings.ConfigException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Which rank trains on which in-memory shard: each executor's shards go to one rank (executor i of
 * those holding shards, in id order, to rank i mod world), so a rank placed on that executor reads
 * them where they are cached; then, split by split, whole shards move from the rank with the most
 * samples to the one with the fewest while that narrows the gap. What moved is read over the
 * network unless the two ranks share a host. Every rank takes the same number of samples per epoch,
 * so a rank with more only sees a different subset each epoch.
 */
public final class ShardAssignment implements Serializable {
  private final int world;
  private final Map<String, Integer> rankOfShard; // split/shard -> rank
  private final long[][] rows; // [split: train, val][rank]
  private final int moved;

  private ShardAssignment(int world, Map<String, Integer> rankOfShard, long[][] rows, int moved) {
    this.world = world;
    this.rankOfShard = rankOfShard;
    this.rows = rows;
    this.moved = moved;
  }

  /** Assigns {@code shards} (with the executors that cached them) to {@code world} ranks. */
  public static ShardAssignment of(List<ShardResult> shards, int world) {
    return of(shards, world, world);
  }

  /**
   * As above, the ranks on {@code nodes} nodes of world / nodes devices (rank r is device r / nodes
   * of node r mod nodes, one trainer task a node): executor i's shards go to node i mod nodes's
   * device 0, each node's are balanced over its devices first (they stay where they are cached),
   * then over every rank; only the shards that left their executor's node count as moved.
   */
  public static ShardAssignment of(List<ShardResult> shards, int world, int nodes) {
    if (world < 1 || nodes < 1 || world % nodes != 0) {
      throw new IllegalArgumentException(
          "world size must be >= 1 and a multiple of the nodes, got " + world + " on " + nodes);
    }
    TreeSet<String> executors = new TreeSet<>(EXECUTOR_ORDER);
    shards.forEach(s -> executors.add(s.executor()));
    Map<String, Integer> home = new HashMap<>();
    for (String executor : executors) {
      home.put(executor, home.size() % nodes);
    }
    Map<String, Integer> rankOfShard = new HashMap<>();
    long[][] rows = new long[2][world];
    int moved = 0;
    List<String> splits = List.of(Manifest.TRAIN, Manifest.VAL);
    for (int split = 0; split < splits.size(); split++) {
      List<List<ShardResult>> byRank = new ArrayList<>();
      for (int r = 0; r < world; r++) {
        byRank.add(new ArrayList<>());
      }
      for (ShardResult s : shards) {
        if (s.split().equals(splits.get(split)) && s.stats().rows() > 0) {
          byRank.get(home.get(s.executor())).add(s);
        }
      }
      for (int n = 0; n < nodes; n++) {
        List<List<ShardResult>> nodeRanks = new ArrayList<>();
        for (int r = n; r < world; r += nodes) {
          nodeRanks.add(byRank.get(r));
        }
        balance(nodeRanks, nodeRanks.size()); // within one node: nothing leaves it
      }
      moved += balance(byRank, nodes);
      for (int r = 0; r < world; r++) {
        for (ShardResult s : byRank.get(r)) {
          rankOfShard.put(key(s), r);
          rows[split][r] += s.stats().rows();
        }
      }
    }
    return new ShardAssignment(world, rankOfShard, rows, moved);
  }

  /**
   * Moves whole shards from the rank with the most samples to the one with the fewest while a shard
   * smaller than the gap exists (each move lowers the sum of squared counts: it ends); returns how
   * many moved to another node, rank r being on node r mod {@code nodes}.
   */
  private static int balance(List<List<ShardResult>> byRank, int nodes) {
    int moves = 0;
    while (true) {
      int most = 0;
      int fewest = 0;
      for (int r = 1; r < byRank.size(); r++) {
        if (rows(byRank.get(r)) > rows(byRank.get(most))) {
          most = r;
        }
        if (rows(byRank.get(r)) < rows(byRank.get(fewest))) {
          fewest = r;
        }
      }
      long gap = rows(byRank.get(most)) - rows(byRank.get(fewest));
      ShardResult largestThatNarrows = null;
      for (ShardResult s : byRank.get(most)) {
        long n = s.stats().rows();
        if (n < gap && (largestThatNarrows == null || n > largestThatNarrows.stats().rows())) {
          largestThatNarrows = s;
        }
      }
      if (largestThatNarrows == null) {
        return moves;
      }
      byRank.get(most).remove(largestThatNarrows);
      byRank.get(fewest).add(largestThatNarrows);
      moves += most % nodes == fewest % nodes ? 0 : 1;
    }
  }

  private static long rows(List<ShardResult> shards) {
    return shards.stream().mapToLong(s -> s.stats().rows()).sum();
  }

  /**
   * Assigns the shards of a committed dataset ({@code manifest}) to {@code world} ranks, balanced
   * by samples: no executor holds them, every rank reads its own from the dataset's storage.
   */
  public static ShardAssignment of(Manifest manifest, int world) {
    List<ShardResult> shards = new ArrayList<>();
    for (String split : List.of(Manifest.TRAIN, Manifest.VAL)) {
      List<Manifest.Shard> listed = manifest.split(split).shards();
      for (int i = 0; i < listed.size(); i++) {
        Manifest.Shard s = listed.get(i);
        ShardStats stats = new ShardStats(s.rows(), s.bytes(), 0, s.classCounts());
        shards.add(new ShardResult(split, i, s.rows(), stats, List.of(), null, STORAGE));
      }
    }
    return of(shards, world);
  }

  /** Where a committed dataset's shards are: the same for all, so balancing alone places them. */
  private static final String STORAGE = "storage";

  /**
   * Fails, naming the keys, where a rank holds fewer train samples than its share of a batch of
   * {@code batchSize}.
   */
  public void requireABatchPerRank(int batchSize) {
    long perRankBatch = batchSize / world;
    for (int r = 0; r < world; r++) {
      long held = rows(Manifest.TRAIN, r);
      if (held < perRankBatch) {
        throw new ConfigException(
            String.format(
                "ramtrain.dist.ranks = %d: rank %d holds %d train samples of its own shards,"
                    + " fewer than its share of a batch (ramtrain.train.batch-size %d / %d ranks);"
                    + " use fewer ranks, a smaller batch, or more shards (ramtrain.etl.shard-size)",
                world, r, held, batchSize, world));
      }
    }
  }

  /** Executor ids in number order ("driver", local mode's only one, first). */
  private static final Comparator<String> EXECUTOR_ORDER =
      Comparator.comparing((String id) -> id.chars().allMatch(Character::isDigit))
          .thenComparingInt(String::length)
          .thenComparing(Comparator.naturalOrder());

  static String key(ShardResult shard) {
    return shard.split() + "/" + shard.shard();
  }

  public int world() {
    return world;
  }

  /** The rank that trains on {@code shard}, or -1 for a shard with no rows (nobody reads it). */
  public int rankOf(ShardResult shard) {
    return rankOf(key(shard));
  }

  /** The rank of shard {@code shard} of {@code split}, or -1. */
  public int rankOf(String split, int shard) {
    return rankOf(split + "/" + shard);
  }

  /** The rank of the shard with {@link #key}, or -1. */
  int rankOf(String key) {
    return rankOfShard.getOrDefault(key, -1);
  }

  /** Samples of {@code split} that {@code rank} holds. */
  public long rows(String split, int rank) {
    return rows[split.equals(Manifest.TRAIN) ? 0 : 1][rank];
  }

  /** Shards that are not trained on where they were cached (to balance the ranks). */
  public int moved() {
    return moved;
  }

  /**
   * Train samples every rank takes per epoch: the fewest any rank holds, or with padding the most
   * (the others wrap around their own).
   */
  public long trainPerEpoch(boolean pad) {
    long fewest = Long.MAX_VALUE;
    long most = 0;
    for (long n : rows[0]) {
      fewest = Math.min(fewest, n);
      most = Math.max(most, n);
    }
    return pad ? most : fewest;
  }
}
