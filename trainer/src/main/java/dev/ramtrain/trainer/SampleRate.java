package dev.ramtrain.trainer;

/**
 * Samples per second as a step record shows them: every sample since the previous record, over the
 * wall time since then. A logged step's own time is no measure of throughput: the loop enqueues
 * steps ahead, so a step that waits for its result also waits for the steps still running before it
 * (a chart of n / that time read two to three times low).
 */
final class SampleRate {
  private long since;
  private long samples;

  /** Starts a window at {@code now} (nanoseconds). */
  void restart(long now) {
    since = now;
    samples = 0;
  }

  void add(long n) {
    samples += n;
  }

  /** The window's rate at {@code now}, when all its samples are done; a new window starts. */
  double take(long now) {
    double seconds = Math.max(now - since, 1) / 1e9;
    double rate = samples / seconds;
    restart(now);
    return rate;
  }
}
