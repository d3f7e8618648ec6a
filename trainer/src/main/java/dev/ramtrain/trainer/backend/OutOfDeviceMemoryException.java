package dev.ramtrain.trainer.backend;

/**
 * An allocation the device cannot give: the message names what was being allocated, its size, what
 * is in use and the limit (and the setting that raises it), in one line.
 */
public final class OutOfDeviceMemoryException extends RuntimeException {
  public OutOfDeviceMemoryException(String message) {
    super(message);
  }
}
