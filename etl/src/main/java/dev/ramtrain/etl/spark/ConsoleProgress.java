package dev.ramtrain.etl.spark;

import dev.ramtrain.console.ProgressLine;
import java.time.Duration;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * The preprocessing job's progress line (files/s, MB/s, ETA), from the accumulators tasks add to
 * per file, with the running tasks' latest counts ({@link RunningTaskCounts}): the line moves with
 * the files, not with the shards.
 */
final class ConsoleProgress implements AutoCloseable {
  private final String label;
  private final long total;
  private final long startNanos;
  private final LiveProgress live;

  private ConsoleProgress(
      String label,
      long total,
      LongAccumulator files,
      LongAccumulator bytes,
      SparkContext spark,
      long startNanos) {
    this.label = label;
    this.total = total;
    this.startNanos = startNanos;
    this.live = LiveProgress.start(spark, Duration.ofMillis(500), this::text, files, bytes);
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
    return new ConsoleProgress(label, total, files, bytes, spark, startNanos);
  }

  String text() {
    return live.text();
  }

  private String text(RunningTaskCounts counts) {
    double seconds = Math.max(1e-3, (System.nanoTime() - startNanos) / 1e9);
    // A task that ends between the two reads counts twice for an instant: never past the total.
    long done = Math.min(total, counts.current(0));
    long read = counts.current(1);
    double rate = done / seconds;
    String eta = ProgressLine.eta(done, total, rate);
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
    live.close();
  }
}
