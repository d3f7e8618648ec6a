package dev.ramtrain.trainer.dist;

import java.io.IOException;

/**
 * A collective operation failed: a peer closed its connection, stopped answering within the
 * timeout, or refused the handshake. The message names this rank and the rank at fault.
 */
public class CollectiveException extends IOException {
  public CollectiveException(String message) {
    super(message);
  }

  public CollectiveException(String message, Throwable cause) {
    super(message, cause);
  }

  /** The peer closed its end: it died, or it refused this rank's handshake. */
  static final class PeerClosed extends CollectiveException {
    PeerClosed(String message) {
      super(message);
    }
  }
}
