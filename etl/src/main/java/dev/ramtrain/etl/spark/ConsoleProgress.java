package dev.ramtrain.etl.spark;

import dev.ramtrain.format.console.ProgressLine;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.util.LongAccumulator;
import scala.Tuple4;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The preprocessing job's progress line (files/s, MB/s, ETA), from the accumulators tasks add to
 * per file. A driver-side accumulator takes a task's count only when the task ends; running tasks'
 * counts arrive with each executor heartbeat (spark.executor.heartbeatInterval), so the line adds
 * the latest of those for the tasks still running and moves with the files, not with the shards.
 */
final class ConsoleProgress implements AutoCloseable {
  private final String label;
  private final long total;
  private final LongAccumulator files;
  private final LongAccumulator bytes;
  private final long startNanos;
  private final ProgressLine line = new ProgressLine();
  private final Thread thread;
  private final SparkContext spark;
  private final RunningTasks running = new RunningTasks();
  private volatile boolean active = true;

  private ConsoleProgress(
      String label,
      long total,
      LongAccumulator files,
      LongAccumulator bytes,
      SparkContext spark,
      long startNanos) {
    this.label = label;
    this.startNanos = startNanos;
    this.total = total;
    this.files = files;
    this.bytes = bytes;
    this.spark = spark;
    this.thread = new Thread(this::loop, "ramtrain-progress");
    thread.setDaemon(true);
  }

  /**
   * Starts the line; its clock runs from {@code startNanos} (System.nanoTime), the same instant the
   * run's final figures count from, so the last rate shown is the one the summary reports.
   */
  static ConsoleProgress start(
      String label,
      long total,
      LongAccumulator files,
      LongAccumulator bytes,
      SparkContext spark,
      long startNanos) {
    ConsoleProgress progress = new ConsoleProgress(label, total, files, bytes, spark, startNanos);
    spark.addSparkListener(progress.running);
    progress.thread.start();
    return progress;
  }

  /**
   * The latest accumulator values of the tasks still running, by task id: replaced by each
   * heartbeat, dropped when the task ends (its count is then in the accumulator itself).
   */
  final class RunningTasks extends SparkListener {
    private final Map<Long, long[]> partial = new ConcurrentHashMap<>();

    @Override
    public void onExecutorMetricsUpdate(SparkListenerExecutorMetricsUpdate update) {
      for (Tuple4<Object, Object, Object, Seq<AccumulableInfo>> task :
          CollectionConverters.asJava(update.accumUpdates())) {
        long[] counts = partial.computeIfAbsent((Long) task._1(), id -> new long[2]);
        for (AccumulableInfo info : CollectionConverters.asJava(task._4())) {
          if (info.update().isDefined()) {
            if (info.id() == files.id()) {
              counts[0] = ((Number) info.update().get()).longValue();
            } else if (info.id() == bytes.id()) {
              counts[1] = ((Number) info.update().get()).longValue();
            }
          }
        }
      }
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
      partial.remove(end.taskInfo().taskId());
    }

    long files() {
      return partial.values().stream().mapToLong(c -> c[0]).sum();
    }

    long bytes() {
      return partial.values().stream().mapToLong(c -> c[1]).sum();
    }
  }

  private void loop() {
    while (active) {
      try {
        Thread.sleep(500);
      } catch (InterruptedException e) {
        return;
      }
      line.update(this::text);
    }
  }

  String text() {
    double seconds = Math.max(1e-3, (System.nanoTime() - startNanos) / 1e9);
    // A task that ends between the two reads counts twice for an instant: never past the total.
    long done = Math.min(total, files.value() + running.files());
    long read = bytes.value() + running.bytes();
    double rate = done / seconds;
    String eta =
        rate > 0 && done < total
            ? ProgressLine.format(Duration.ofSeconds((long) ((total - done) / rate)))
            : "-";
    return String.format(
        "%s %,d/%,d files  %,.0f files/s  %.1f MB/s  elapsed %s  ETA %s",
        label,
        done,
        total,
        rate,
        read / seconds / 1e6,
        ProgressLine.format(Duration.ofSeconds((long) seconds)),
        eta);
  }

  @Override
  public void close() {
    active = false;
    thread.interrupt();
    spark.removeSparkListener(running);
    line.finish(text());
  }
}
