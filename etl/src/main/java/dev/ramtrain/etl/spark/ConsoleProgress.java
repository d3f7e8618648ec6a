package dev.ramtrain.etl.spark;

import java.io.PrintStream;
import java.time.Duration;
import org.apache.spark.util.LongAccumulator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One updating console line (files/s, MB/s, ETA) while a Spark job runs, fed by accumulators that
 * tasks add to. On a terminal it redraws in place; otherwise it logs a line every 10 seconds.
 * Accumulators reach the driver as tasks finish, so the line moves shard by shard.
 */
final class ConsoleProgress implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ConsoleProgress.class);

  private final String label;
  private final long total;
  private final LongAccumulator files;
  private final LongAccumulator bytes;
  private final long startNanos = System.nanoTime();
  private final boolean terminal = System.console() != null;
  private final PrintStream out = System.err;
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
    long lastLog = 0;
    while (running) {
      try {
        Thread.sleep(terminal ? 500 : 1000);
      } catch (InterruptedException e) {
        return;
      }
      long now = System.nanoTime();
      if (terminal) {
        out.print("\r" + line());
        out.flush();
      } else if (now - lastLog > 10_000_000_000L) {
        LOG.info(line());
        lastLog = now;
      }
    }
  }

  String line() {
    double seconds = Math.max(1e-3, (System.nanoTime() - startNanos) / 1e9);
    long done = files.value();
    double rate = done / seconds;
    String eta =
        rate > 0 && done < total ? format(Duration.ofSeconds((long) ((total - done) / rate))) : "-";
    return String.format(
        "%s %,d/%,d files  %,.0f files/s  %.1f MB/s  elapsed %s  ETA %s   ",
        label,
        done,
        total,
        rate,
        bytes.value() / seconds / 1e6,
        format(Duration.ofSeconds((long) seconds)),
        eta);
  }

  private static String format(Duration d) {
    return String.format("%d:%02d:%02d", d.toHours(), d.toMinutesPart(), d.toSecondsPart());
  }

  @Override
  public void close() {
    running = false;
    thread.interrupt();
    if (terminal) {
      out.println("\r" + line());
    } else {
      LOG.info(line());
    }
  }
}
