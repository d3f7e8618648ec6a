package dev.ramtrain.trainer.data;

/** A stored image that does not decode, named by its sample id and shard. */
public final class BadSampleException extends RuntimeException {
  public BadSampleException(String message) {
    super(message);
  }
}
