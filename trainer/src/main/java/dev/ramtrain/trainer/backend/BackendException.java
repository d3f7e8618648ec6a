package dev.ramtrain.trainer.backend;

/** Device work failed; raised at the synchronize that follows it, naming the stream. */
public final class BackendException extends RuntimeException {
  public BackendException(String message, Throwable cause) {
    super(message, cause);
  }

  public BackendException(String message) {
    super(message);
  }
}
