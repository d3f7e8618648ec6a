package dev.ramtrain.jobs.train;

import dev.ramtrain.trainer.offload.PlacementPlan;
import java.io.Serializable;
import org.apache.spark.SparkConf;

/**
 * How much host memory outside the JVM heap a training run may take: pinned weights, gradients and
 * optimizer state, and on the CPU backend the "device" itself. In one process, what the machine has
 * available; in a Spark executor, what the executor was given beside its heap, as YARN and
 * Kubernetes size its container: {@code spark.executor.memoryOverhead} (by default {@code
 * memoryOverheadFactor} × the heap, at least {@code minMemoryOverhead}) plus {@code
 * spark.memory.offHeap.size} when off-heap memory is enabled. Planning with the machine's memory
 * inside an executor would plan for memory the container does not have.
 *
 * @param bytes the limit; {@link Long#MAX_VALUE}: none besides the machine's
 * @param source where the limit comes from, with the keys that raise it
 */
public record HostLimit(long bytes, String source) implements Serializable {
  private static final long MIB = 1L << 20;

  /** A process of its own: the machine's available memory is the only limit. */
  public static final HostLimit MACHINE = new HostLimit(Long.MAX_VALUE, "this machine");

  /** What an executor with configuration {@code conf} has beside its heap. */
  public static HostLimit executor(SparkConf conf) {
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

  /** {@code available} bytes the machine reports, within this limit. */
  public long cap(long available) {
    return Math.min(available, bytes);
  }

  /** Whether this limit, not the machine, decides for {@code available} bytes. */
  public boolean binds(long available) {
    return bytes < available;
  }
}
