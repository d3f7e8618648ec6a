package dev.ramtrain.etl.spark;

/** The job cannot produce a dataset; the message says why, for the user. */
public final class PreprocessException extends RuntimeException {
  public PreprocessException(String message) {
    super(message);
  }
}
