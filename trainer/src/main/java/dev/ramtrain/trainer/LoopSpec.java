package dev.ramtrain.trainer;

import java.io.Serializable;

/**
 * Settings of the training loop ({@code ramtrain.train.*}). {@code mean} and {@code std} hold one
 * value per channel, or are both empty until {@link #withNormalization} fills them with what was
 * measured on the training data (the loop needs them given).
 */
public record LoopSpec(
    int epochs,
    float labelSmoothing,
    float clipNorm,
    NanPolicy nanPolicy,
    float[] mean,
    float[] std,
    int logEvery,
    int accumulate,
    BestEpoch.Rule best,
    BatchAugmentation batchAugmentation)
    implements Serializable {

  /** What a NaN or infinite loss does: stop with a message, or skip that step's update. */
  public enum NanPolicy {
    STOP,
    SKIP
  }

  /**
   * {@code accumulate}: batches whose gradients make one optimizer step (1: every batch is a step;
   * N: PyTorch's loop that calls {@code optimizer.step()} every N backward passes, the loss divided
   * so that the step's gradient is the mean over all their samples). {@code best}: which epoch's
   * checkpoint is the best, and whether to stop early.
   */
  public LoopSpec {
    if (epochs < 1 || logEvery < 1 || accumulate < 1) {
      throw new IllegalArgumentException("epochs, log-every and accumulate must be >= 1");
    }
    if (mean.length != std.length) {
      throw new IllegalArgumentException("mean and std need one value per channel each");
    }
    mean = mean.clone();
    std = std.clone();
  }

  /** Without gradient accumulation: one optimizer step per batch. */
  public LoopSpec(
      int epochs,
      float labelSmoothing,
      float clipNorm,
      NanPolicy nanPolicy,
      float[] mean,
      float[] std,
      int logEvery) {
    this(
        epochs,
        labelSmoothing,
        clipNorm,
        nanPolicy,
        mean,
        std,
        logEvery,
        1,
        BestEpoch.Rule.DEFAULT,
        BatchAugmentation.NONE);
  }

  /** Without augmentation on the device. */
  public LoopSpec(
      int epochs,
      float labelSmoothing,
      float clipNorm,
      NanPolicy nanPolicy,
      float[] mean,
      float[] std,
      int logEvery,
      int accumulate,
      BestEpoch.Rule best) {
    this(
        epochs,
        labelSmoothing,
        clipNorm,
        nanPolicy,
        mean,
        std,
        logEvery,
        accumulate,
        best,
        BatchAugmentation.NONE);
  }

  /** Optimizer steps in an epoch of {@code batches} batches: a short last group is a step too. */
  public int stepsPerEpoch(int batches) {
    return (batches + accumulate - 1) / accumulate;
  }

  /** Whether the settings gave the normalization (else it is measured on the training data). */
  public boolean normalizationGiven() {
    return mean.length > 0;
  }

  /** These options with the normalization {@code mean}/{@code std}. */
  public LoopSpec withNormalization(float[] mean, float[] std) {
    return new LoopSpec(
        epochs,
        labelSmoothing,
        clipNorm,
        nanPolicy,
        mean,
        std,
        logEvery,
        accumulate,
        best,
        batchAugmentation);
  }

  /** These options augmenting batches on the device as {@code augmentation} says. */
  public LoopSpec withBatchAugmentation(BatchAugmentation augmentation) {
    return new LoopSpec(
        epochs,
        labelSmoothing,
        clipNorm,
        nanPolicy,
        mean,
        std,
        logEvery,
        accumulate,
        best,
        augmentation);
  }
}
