package dev.ramtrain.trainer.optim;

import java.io.Serializable;

/**
 * A run's learning-rate schedule in epochs, as a user states it; {@link #forRun} turns it into
 * optimizer steps once the number of batches per epoch is known.
 */
public record ScheduleSpec(
    Kind kind, double lr, int stepEpochs, double stepGamma, int warmupEpochs, double minLr)
    implements Serializable {

  /** PyTorch's ConstantLR, StepLR, cosine annealing with linear warm-up, OneCycleLR. */
  public enum Kind {
    CONSTANT,
    STEP,
    COSINE,
    ONE_CYCLE
  }

  public ScheduleSpec {
    if (!(lr > 0)) {
      throw new IllegalArgumentException("the learning rate must be > 0, got " + lr);
    }
    if (stepEpochs < 1 || warmupEpochs < 0 || !(stepGamma > 0) || !(minLr >= 0)) {
      throw new IllegalArgumentException(
          "step epochs must be >= 1, warm-up epochs >= 0, step gamma > 0 and min lr >= 0");
    }
  }

  /** Whether the rate at a step depends on the run's length (so extending a run changes it). */
  public boolean dependsOnRunLength() {
    return kind == Kind.COSINE || kind == Kind.ONE_CYCLE;
  }

  /** The schedule over {@code epochs} of {@code stepsPerEpoch} optimizer steps. */
  public LrSchedule forRun(int stepsPerEpoch, int epochs) {
    long total = (long) stepsPerEpoch * epochs;
    return switch (kind) {
      case CONSTANT -> LrSchedule.constant(lr);
      case STEP -> LrSchedule.stepDecay(lr, (long) stepEpochs * stepsPerEpoch, stepGamma);
      case COSINE -> LrSchedule.cosine(lr, (long) warmupEpochs * stepsPerEpoch, total, minLr);
      case ONE_CYCLE -> LrSchedule.oneCycle(lr, total, 0.3, 25, 1e4);
    };
  }
}
