package dev.ramtrain.jobs.train;

import java.time.Duration;
import org.apache.spark.SparkContext;

/**
 * How many data-parallel ranks {@code train} runs on a cluster when none are asked for: one per
 * executor (one trainer task per node), as many as divide the global batch evenly. Executors
 * register with the driver after it starts, one by one; this waits until the count has held still
 * for a few seconds (or {@code spark.executor.instances} have come, where a resource manager sets
 * it), and at most {@code spark.scheduler.maxRegisteredResourcesWaitingTime}.
 */
public final class ExecutorRanks {
  private static final Duration SETTLE = Duration.ofSeconds(3);
  private static final Duration POLL = Duration.ofMillis(100);

  /** The ranks chosen, and why, for the console. */
  public record Choice(int ranks, String why) {}

  private ExecutorRanks() {}

  public static Choice choose(SparkContext sc, int globalBatch) throws InterruptedException {
    return choose(sc, globalBatch, 1);
  }

  /**
   * As above, each executor a node of {@code devicesPerNode} devices (its GPUs): the ranks are
   * nodes x devices, as many nodes as split the global batch evenly into every device's share.
   */
  public static Choice choose(SparkContext sc, int globalBatch, int devicesPerNode)
      throws InterruptedException {
    int executors = awaitExecutors(sc);
    int devices = globalBatch % devicesPerNode == 0 ? devicesPerNode : 1;
    int nodes = largestDivisorUpTo(globalBatch / devices, executors);
    String per = devices == 1 ? "" : String.format(" of %d devices", devices);
    String why =
        nodes == executors
            ? String.format(
                "%s per executor (%d registered)",
                devices == 1 ? "one" : "one node" + per, executors)
            : String.format(
                "%d executors registered; %d nodes%s are the most that split"
                    + " ramtrain.train.batch-size = %d evenly",
                executors, nodes, per, globalBatch);
    return new Choice(nodes * devices, why + "; --ranks N chooses");
  }

  static int largestDivisorUpTo(int batch, int limit) {
    for (int r = Math.min(batch, limit); r > 1; r--) {
      if (batch % r == 0) {
        return r;
      }
    }
    return 1;
  }

  private static int awaitExecutors(SparkContext sc) throws InterruptedException {
    int expected = sc.getConf().getInt("spark.executor.instances", 0);
    long deadline =
        System.nanoTime()
            + sc.getConf().getTimeAsMs("spark.scheduler.maxRegisteredResourcesWaitingTime", "30s")
                * 1_000_000L;
    int seen = registered(sc);
    long stillSince = System.nanoTime();
    while (System.nanoTime() < deadline) {
      if (expected > 0 ? seen >= expected : seen > 0 && held(stillSince)) {
        break;
      }
      Thread.sleep(POLL.toMillis());
      int now = registered(sc);
      if (now != seen) {
        seen = now;
        stillSince = System.nanoTime();
      }
    }
    return Math.max(1, seen);
  }

  private static boolean held(long since) {
    return System.nanoTime() - since >= SETTLE.toNanos();
  }

  /** Executors registered now: Spark's list holds the driver too. */
  private static int registered(SparkContext sc) {
    return Math.max(0, sc.statusTracker().getExecutorInfos().length - 1);
  }
}
