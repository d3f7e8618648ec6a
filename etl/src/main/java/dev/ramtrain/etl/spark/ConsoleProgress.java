package dev.ramtrain.etl.spark;

import dev.ramtrain.format.console.ProgressLine;
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
  private final ProgressLine line = new ProgressLine();
  private final Thread thread;
  private final SparkContext spark;
  private final RunningTaskCounts running;
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
    this.spark = spark;
    this.running = new RunningTaskCounts(files, bytes);
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
    long done = Math.min(total, running.current(0));
    long read = running.current(1);
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
