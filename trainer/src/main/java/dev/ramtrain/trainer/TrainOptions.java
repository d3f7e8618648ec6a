package dev.ramtrain.trainer;

/** Settings of the training loop ({@code ramtrain.train.*}). */
public record TrainOptions(
    int epochs,
    float labelSmoothing,
    float clipNorm,
    NanPolicy nanPolicy,
    float[] mean,
    float[] std,
    int logEvery) {

  /** What a NaN or infinite loss does: stop with a message, or skip that step's update. */
  public enum NanPolicy {
    STOP,
    SKIP
  }

  public TrainOptions {
    if (epochs < 1 || logEvery < 1) {
      throw new IllegalArgumentException("epochs and log-every must be >= 1");
    }
    if (mean.length != std.length) {
      throw new IllegalArgumentException("mean and std need one value per channel each");
    }
    mean = mean.clone();
    std = std.clone();
  }
}
