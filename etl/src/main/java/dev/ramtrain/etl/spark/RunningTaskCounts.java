package dev.ramtrain.etl.spark;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.util.LongAccumulator;
import scala.Tuple4;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Counts that move while tasks run. A driver-side accumulator takes a task's count only when the
 * task ends; running tasks' counts arrive with each executor heartbeat
 * (spark.executor.heartbeatInterval). This listener keeps the latest of those per running task,
 * drops a task's when it ends (its count is then in the accumulator itself), and adds them up.
 */
public final class RunningTaskCounts extends SparkListener {
  private final List<LongAccumulator> accumulators;
  private final Map<Long, long[]> partial = new ConcurrentHashMap<>();

  public RunningTaskCounts(LongAccumulator... accumulators) {
    this.accumulators = List.of(accumulators);
  }

  @Override
  public void onExecutorMetricsUpdate(SparkListenerExecutorMetricsUpdate update) {
    for (Tuple4<Object, Object, Object, Seq<AccumulableInfo>> task :
        CollectionConverters.asJava(update.accumUpdates())) {
      long[] counts =
          partial.computeIfAbsent((Long) task._1(), id -> new long[accumulators.size()]);
      for (AccumulableInfo info : CollectionConverters.asJava(task._4())) {
        if (info.update().isEmpty()) {
          continue;
        }
        for (int i = 0; i < accumulators.size(); i++) {
          if (info.id() == accumulators.get(i).id()) {
            counts[i] = ((Number) info.update().get()).longValue();
          }
        }
      }
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd end) {
    partial.remove(end.taskInfo().taskId());
  }

  /** Accumulator {@code i}'s value with the running tasks' latest counts added. */
  public long current(int i) {
    return accumulators.get(i).value() + partial.values().stream().mapToLong(c -> c[i]).sum();
  }
}
