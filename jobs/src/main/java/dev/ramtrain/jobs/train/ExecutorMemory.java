package dev.ramtrain.jobs.train;

import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.run.HostLimit;
import org.apache.spark.SparkConf;

/**
 * What a Spark executor was given beside its heap, as YARN and Kubernetes size its container:
 * {@code spark.executor.memoryOverhead} (by default {@code memoryOverheadFactor} × the heap, at
 * least {@code minMemoryOverhead}) plus {@code spark.memory.offHeap.size} when off-heap memory is
 * enabled: the host memory a training rank there may take.
 */
final class ExecutorMemory {
  private static final long MIB = 1L << 20;

  private ExecutorMemory() {}

  /** The host limit of a rank in an executor with configuration {@code conf}. */
  static HostLimit hostLimit(SparkConf conf) {
    long heap = conf.getSizeAsBytes("spark.executor.memory", "1g");
    long overhead =
        conf.contains("spark.executor.memoryOverhead")
            ? conf.getSizeAsMb("spark.executor.memoryOverhead", "0") * MIB
            : Math.max(
                conf.getSizeAsMb("spark.executor.minMemoryOverhead", "384m") * MIB,
                (long) (conf.getDouble("spark.executor.memoryOverheadFactor", 0.1) * heap));
    long offHeap =
        conf.getBoolean("spark.memory.offHeap.enabled", false)
            ? conf.getSizeAsBytes("spark.memory.offHeap.size", "0")
            : 0;
    return new HostLimit(
        overhead + offHeap,
        String.format(
            "the executor's memory beside its heap, %s (spark.executor.memoryOverhead%s)",
            PlacementPlan.bytes(overhead + offHeap),
            offHeap > 0 ? " + spark.memory.offHeap.size" : ""));
  }
}
