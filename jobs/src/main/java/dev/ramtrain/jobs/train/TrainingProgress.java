package dev.ramtrain.jobs.train;

import dev.ramtrain.console.ProgressLine;
import dev.ramtrain.etl.spark.LiveProgress;
import java.time.Duration;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * The driver's progress line for a data-parallel run on a cluster, where rank 0's own line goes to
 * its executor's log: the steps rank 0 has run of those it has to (accumulators it adds to, seen
 * with the executor heartbeats: a retried stage's new attempt starts over), steps/s and ETA.
 */
final class TrainingProgress {
  private TrainingProgress() {}

  /**
   * Starts the line: {@code total} holds the steps the stage's rank 0 has to run (it adds them
   * once, a resumed run's remaining ones), {@code steps} those it has run (one per step).
   */
  static LiveProgress start(SparkContext spark, LongAccumulator steps, LongAccumulator total) {
    long start = System.nanoTime();
    return LiveProgress.start(
        spark,
        Duration.ofSeconds(1),
        counts -> text(counts.current(0), counts.current(1), (System.nanoTime() - start) / 1e9),
        steps,
        total);
  }

  /** The line for {@code done} of {@code of} steps after {@code seconds}. */
  static String text(long done, long of, double seconds) {
    if (of == 0) {
      return "train: the ranks are starting";
    }
    double rate = done / Math.max(1e-3, seconds);
    String eta = ProgressLine.eta(done, of, rate);
    return String.format(
        "train %,d/%,d steps  %,.1f steps/s  elapsed %s  ETA %s",
        done, of, rate, ProgressLine.format(Duration.ofSeconds((long) seconds)), eta);
  }
}
