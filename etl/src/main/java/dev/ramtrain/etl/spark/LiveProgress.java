package dev.ramtrain.etl.spark;

import dev.ramtrain.console.ProgressLine;
import java.time.Duration;
import java.util.function.Function;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * A console line that a driver thread redraws while Spark tasks run, from accumulators the tasks
 * add to: it listens for their heartbeat updates ({@link RunningTaskCounts}) and draws the text of
 * the current counts every period; closing draws the last line and stops listening.
 */
public final class LiveProgress implements AutoCloseable {
  private final SparkContext spark;
  private final RunningTaskCounts counts;
  private final Function<RunningTaskCounts, String> text;
  private final ProgressLine line = new ProgressLine();
  private final Thread thread;
  private volatile boolean active = true;

  private LiveProgress(
      SparkContext spark,
      Duration period,
      Function<RunningTaskCounts, String> text,
      LongAccumulator... accumulators) {
    this.spark = spark;
    this.counts = new RunningTaskCounts(accumulators);
    this.text = text;
    this.thread = new Thread(() -> loop(period), "ramtrain-progress");
    thread.setDaemon(true);
  }

  /** Starts redrawing {@code text} of the {@code accumulators}' counts every {@code period}. */
  public static LiveProgress start(
      SparkContext spark,
      Duration period,
      Function<RunningTaskCounts, String> text,
      LongAccumulator... accumulators) {
    LiveProgress progress = new LiveProgress(spark, period, text, accumulators);
    spark.addSparkListener(progress.counts);
    progress.thread.start();
    return progress;
  }

  /** The line as it would be drawn now. */
  public String text() {
    return text.apply(counts);
  }

  private void loop(Duration period) {
    while (active) {
      try {
        Thread.sleep(period.toMillis());
      } catch (InterruptedException e) {
        return;
      }
      line.update(this::text);
    }
  }

  @Override
  public void close() {
    active = false;
    thread.interrupt();
    spark.removeSparkListener(counts);
    line.finish(text());
  }
}
