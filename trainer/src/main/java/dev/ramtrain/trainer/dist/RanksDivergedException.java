package dev.ramtrain.trainer.dist;

/**
 * Ranks that must hold the same bits (weights after every averaged step) do not: a defect, not a
 * mishap. Running the stage again computes the same thing, so whoever runs the ranks fails the job
 * instead of retrying it.
 */
public final class RanksDivergedException extends IllegalStateException {
  public RanksDivergedException(String message) {
    super(message);
  }
}
