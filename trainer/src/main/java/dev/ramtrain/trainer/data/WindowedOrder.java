package dev.ramtrain.trainer.data;

import dev.ramtrain.random.Seeds;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * An epoch's quasi-random order over shards kept a window at a time: the shards in a random order
 * (drawn from the seed, the epoch and the stream), cut into windows of {@code windowShards}, and
 * within each window every row of its shards in a random order. Each sample once, as a global
 * shuffle, but a reader needs only one window's shards at a time (and the next, read ahead). Not
 * shuffled: the shards in order, their rows in order (evaluation).
 *
 * @param samples the order: shard {@code << 32 |} row within the shard
 * @param windowEnds where each window's samples end in {@code samples}
 * @param windowShards the shards of each window
 */
record WindowedOrder(long[] samples, long[] windowEnds, int[][] windowShards) {

  static WindowedOrder draw(
      long[] shardRows, int windowShards, boolean shuffle, long seed, int epoch, long stream) {
    int n = shardRows.length;
    int[] shards = new int[n];
    Arrays.setAll(shards, i -> i);
    SplittableRandom rng = new SplittableRandom(Seeds.mix(seed, epoch, stream));
    if (shuffle) {
      shuffle(shards, rng);
    }
    // in long: a window of Integer.MAX_VALUE shards (every shard) overflowed to no window at all
    int windows = (int) ((n + (long) windowShards - 1) / windowShards);
    long total = Arrays.stream(shardRows).sum();
    long[] samples = new long[Math.toIntExact(total)];
    long[] ends = new long[windows];
    int[][] members = new int[windows][];
    int at = 0;
    for (int w = 0; w < windows; w++) {
      members[w] =
          Arrays.copyOfRange(
              shards, w * windowShards, (int) Math.min(n, (long) (w + 1) * windowShards));
      int start = at;
      for (int shard : members[w]) {
        for (long row = 0; row < shardRows[shard]; row++) {
          samples[at++] = (long) shard << 32 | row;
        }
      }
      if (shuffle) { // uniformly among the window's rows
        for (int i = at - 1; i > start; i--) {
          int j = start + rng.nextInt(i - start + 1);
          long t = samples[i];
          samples[i] = samples[j];
          samples[j] = t;
        }
      }
      ends[w] = at;
    }
    return new WindowedOrder(samples, ends, members);
  }

  private static void shuffle(int[] values, SplittableRandom rng) {
    for (int i = values.length - 1; i > 0; i--) {
      int j = rng.nextInt(i + 1);
      int t = values[i];
      values[i] = values[j];
      values[j] = t;
    }
  }

  int windows() {
    return windowEnds.length;
  }

  /** The window of position {@code position} of the order. */
  int windowAt(long position) {
    return SortedLongs.firstAbove(windowEnds, position); // the first window ending after it
  }
}
