package dev.ramtrain.trainer.backend;

/** The backend a run asked for cannot be opened here (no GPU, no driver, not in this build). */
public final class BackendUnavailableException extends RuntimeException {
  public BackendUnavailableException(String message) {
    super(message);
  }
}
