package dev.ramtrain.trainer;

/** Work that takes a while and is not cut short: what a test closes things under. */
public final class SlowWork {
  private SlowWork() {}

  /**
   * Sleeps {@code millis}, through interrupts: work on a stream or the host optimizer's thread runs
   * to its end, as device work does. Long beside a close's own path, so a close that did not wait
   * for it returns before it ends.
   */
  public static void run(long millis) {
    long end = System.nanoTime() + millis * 1_000_000;
    for (long left; (left = end - System.nanoTime()) > 0; ) {
      try {
        Thread.sleep(Math.max(1, left / 1_000_000));
      } catch (InterruptedException e) {
        // not cut short, as said
      }
    }
  }
}
