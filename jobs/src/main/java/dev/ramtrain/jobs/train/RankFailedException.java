package dev.ramtrain.jobs.train;

/** A data-parallel rank failed; the message is that rank's own error, named by its rank. */
public final class RankFailedException extends RuntimeException {
  public RankFailedException(String message, Throwable stageFailure) {
    super(message, stageFailure);
  }
}
