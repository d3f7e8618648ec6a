package dev.ramtrain.etl.spark;

import dev.ramtrain.format.console.ProgressLine;
import java.time.Duration;
import org.apache.spark.util.LongAccumulator;

/**
 * The preprocessing job's progress line (files/s, MB/s, ETA), polled from accumulators that tasks
 * add to. Accumulators reach the driver as tasks finish, so the line moves shard by shard.
 */
final class ConsoleProgress implements AutoCloseable {
  private final String label;
  private final long total;
  private final LongAccumulator files;
  private final LongAccumulator bytes;
  private final long startNanos = System.nanoTime();
  private final ProgressLine line = new ProgressLine();
  private final Thread thread;
  private volatile boolean running = true;

  private ConsoleProgress(String label, long total, LongAccumulator files, LongAccumulator bytes) {
    this.label = label;
    this.total = total;
    this.files = files;
    this.bytes = bytes;
    this.thread = new Thread(this::loop, "ramtrain-progress");
    thread.setDaemon(true);
  }

  static ConsoleProgress start(
      String label, long total, LongAccumulator files, LongAccumulator bytes) {
    ConsoleProgress progress = new ConsoleProgress(label, total, files, bytes);
    progress.thread.start();
    return progress;
  }

  private void loop() {
    while (running) {
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
    long done = files.value();
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
        bytes.value() / seconds / 1e6,
        ProgressLine.format(Duration.ofSeconds((long) seconds)),
        eta);
  }

  @Override
  public void close() {
    running = false;
    thread.interrupt();
    line.finish(text());
  }
}
