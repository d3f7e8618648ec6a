package dev.ramtrain.jobs.config;

/** {@code ramtrain.offload.*}: whether and how training offloads to host memory. */
public final class OffloadSettings {
  private static final String P = "ramtrain.offload.";

  /** When training offloads: only if resident does not fit, always, or never. */
  public enum Mode {
    AUTO,
    ON,
    OFF
  }

  private final RamtrainConfig c;

  public OffloadSettings(RamtrainConfig c) {
    this.c = c;
    require(c.integer(P + "prefetch-depth") >= 1, "prefetch-depth", "must be >= 1");
    require(c.integer(P + "host-threads") >= 0, "host-threads", "must be >= 0 (0 = all cores)");
    require(c.bytes(P + "budget") >= 0, "budget", "must be >= 0 (0 = device memory - margin)");
    c.choice(P + "mode", Mode.class);
    require(
        c.integer(P + "delayed-update-warmup-steps") >= 0,
        "delayed-update-warmup-steps",
        "must be >= 0");
  }

  private static void require(boolean ok, String key, String message) {
    if (!ok) {
      throw new ConfigException(P + key + " " + message);
    }
  }

  public Mode mode() {
    return c.choice(P + "mode", Mode.class);
  }

  /** The budget for a device of {@code memoryBytes}: the one given, or memory minus the margin. */
  public long budget(long memoryBytes) {
    long given = c.bytes(P + "budget");
    long budget = given > 0 ? given : memoryBytes - c.bytes(P + "margin");
    if (budget <= 0) {
      throw new ConfigException(
          P
              + "margin ("
              + c.bytes(P + "margin")
              + " bytes) leaves no device memory of "
              + memoryBytes);
    }
    return budget;
  }

  public int prefetchDepth() {
    return c.integer(P + "prefetch-depth");
  }

  public boolean bf16Weights() {
    return c.bool(P + "bf16-weights");
  }

  /** ZeRO-Offload's one-step-delayed update (no gradient clipping with it). */
  public boolean delayedUpdate() {
    return c.bool(P + "delayed-update");
  }

  /** Steps run undelayed before the delayed update starts. */
  public int delayWarmupSteps() {
    return c.integer(P + "delayed-update-warmup-steps");
  }

  public int hostThreads() {
    int t = c.integer(P + "host-threads");
    return t == 0 ? Runtime.getRuntime().availableProcessors() : t;
  }
}
