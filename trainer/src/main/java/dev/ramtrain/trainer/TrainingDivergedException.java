package dev.ramtrain.trainer;

/** The loss became NaN or infinite and the NaN policy is to stop. */
public final class TrainingDivergedException extends RuntimeException {
  public TrainingDivergedException(String message) {
    super(message);
  }
}
