package dev.ramtrain.console;

import java.io.PrintStream;
import java.time.Duration;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One updating console line for long work: redrawn in place (at most twice a second) on a terminal,
 * logged every 10 seconds otherwise (logs and CI output stay readable).
 */
public final class ProgressLine {
  private static final Logger LOG = LoggerFactory.getLogger(ProgressLine.class);
  // bin/ramtrain says whether stderr is a terminal; without it, Java's console (stdin and stdout).
  private final boolean terminal =
      Boolean.parseBoolean(
          System.getProperty("ramtrain.stderr.terminal", String.valueOf(System.console() != null)));
  private final PrintStream out = System.err;
  private long lastDraw;
  private long lastLog = System.nanoTime();

  /** Shows the text, unless the previous update was too recent (then it is not even built). */
  public synchronized void update(Supplier<String> text) {
    long now = System.nanoTime();
    if (terminal && now - lastDraw > 500_000_000L) {
      out.print("\r" + text.get() + "   ");
      out.flush();
      lastDraw = now;
    } else if (!terminal && now - lastLog > 10_000_000_000L) {
      LOG.info(text.get());
      lastLog = now;
    }
  }

  /**
   * Draws the text now on a terminal, however recent the last update (the last step of a pass, so
   * the line does not stay at a step before it while evaluation runs); nothing otherwise.
   */
  public synchronized void draw(String text) {
    if (terminal) {
      out.print("\r" + text + "   ");
      out.flush();
      lastDraw = System.nanoTime();
    }
  }

  /**
   * Empties the line on a terminal, so that a log line printed next starts at its beginning instead
   * of after the progress text; the next update draws it again.
   */
  public synchronized void clear() {
    if (terminal && lastDraw != 0) {
      out.print("\r\033[K");
      out.flush();
      lastDraw = 0;
    }
  }

  /** Shows the final state and ends the line. */
  public synchronized void finish(String text) {
    if (terminal) {
      out.println("\r" + text + "\033[K");
      lastDraw = 0;
    } else {
      LOG.info(text);
    }
  }

  /**
   * The time left at {@code rate} per second for {@code total - done}, or "-" when unknown or done.
   */
  public static String eta(long done, long total, double rate) {
    return rate > 0 && done < total
        ? format(Duration.ofSeconds((long) ((total - done) / rate)))
        : "-";
  }

  /** h:mm:ss */
  public static String format(Duration d) {
    return String.format("%d:%02d:%02d", d.toHours(), d.toMinutesPart(), d.toSecondsPart());
  }
}
