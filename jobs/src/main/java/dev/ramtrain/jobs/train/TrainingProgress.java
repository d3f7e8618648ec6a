package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.spark.RunningTaskCounts;
import dev.ramtrain.format.console.ProgressLine;
import java.time.Duration;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * The driver's progress line for a data-parallel run on a cluster, where rank 0's own line goes to
 * its executor's log: the steps rank 0 has run of those it has to (accumulators it adds to, seen
 * with the executor heartbeats: a retried stage's new attempt starts over), steps/s and ETA.
 */
final class TrainingProgress implements AutoCloseable {
  private final SparkContext spark;
  private final LongAccumulator steps;
  private final LongAccumulator total;
  private final RunningTaskCounts running;
  private final long startNanos = System.nanoTime();
  private final ProgressLine line = new ProgressLine();
  private final Thread thread;
  private volatile boolean active = true;

  private TrainingProgress(SparkContext spark, LongAccumulator steps, LongAccumulator total) {
    this.spark = spark;
    this.steps = steps;
    this.total = total;
    this.running = new RunningTaskCounts(steps, total);
    this.thread = new Thread(this::loop, "ramtrain-train-progress");
    thread.setDaemon(true);
  }

  /**
   * Starts the line: {@code total} holds the steps the stage's rank 0 has to run (it adds them
   * once, a resumed run's remaining ones), {@code steps} those it has run (one per step).
   */
  static TrainingProgress start(SparkContext spark, LongAccumulator steps, LongAccumulator total) {
    TrainingProgress progress = new TrainingProgress(spark, steps, total);
    spark.addSparkListener(progress.running);
    progress.thread.start();
    return progress;
  }

  private void loop() {
    while (active) {
      try {
        Thread.sleep(1000);
      } catch (InterruptedException e) {
        return;
      }
      line.update(this::text);
    }
  }

  String text() {
    return text(running.current(0), running.current(1), (System.nanoTime() - startNanos) / 1e9);
  }

  /** The line for {@code done} of {@code of} steps after {@code seconds}. */
  static String text(long done, long of, double seconds) {
    if (of == 0) {
      return "train: the ranks are starting";
    }
    double rate = done / Math.max(1e-3, seconds);
    String eta =
        rate > 0 && done < of
            ? ProgressLine.format(Duration.ofSeconds((long) ((of - done) / rate)))
            : "-";
    return String.format(
        "train %,d/%,d steps  %,.1f steps/s  elapsed %s  ETA %s",
        done, of, rate, ProgressLine.format(Duration.ofSeconds((long) seconds)), eta);
  }

  @Override
  public void close() {
    active = false;
    thread.interrupt();
    spark.removeSparkListener(running);
    line.finish(text());
  }
}
