package dev.ramtrain.trainer.dist;

/**
 * Another device of this rank's node stopped (failed, or closed its part), so a wait for it ended
 * at once: a consequence, not a cause. Whoever reports a node's failure names the device that
 * failed first for another reason.
 */
public final class NodeStoppedException extends IllegalStateException {
  public NodeStoppedException(String message, Throwable cause) {
    super(message, cause);
  }

  /** Whether {@code failure} or one of its causes is this: a device that stopped for another. */
  public static boolean within(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof NodeStoppedException) {
        return true;
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return false;
  }
}
