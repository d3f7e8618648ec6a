package dev.ramtrain.files;

import java.util.Arrays;

/**
 * Named points inside ramtrain's commits (a dataset's manifest, a checkpoint, a run directory's
 * replacement) where a process can be made to stop and wait, so that a test can kill it there with
 * SIGKILL and check what a reader then sees. Off unless the system property {@value #PROPERTY}
 * names the point (a comma-separated list); then the process prints {@code ramtrain: paused at
 * NAME} on standard error and sleeps until it is killed. Reading a property costs nothing next to
 * the file operations these points sit between.
 */
public final class PausePoints {
  public static final String PROPERTY = "ramtrain.pause-at";

  private PausePoints() {}

  /** Stops here for good when {@value #PROPERTY} names {@code point}. */
  public static void reach(String point) {
    String wanted = System.getProperty(PROPERTY);
    if (wanted == null
        || Arrays.stream(wanted.split(",")).map(String::strip).noneMatch(point::equals)) {
      return;
    }
    System.err.println("ramtrain: paused at " + point);
    System.err.flush();
    while (true) {
      try {
        Thread.sleep(60_000);
      } catch (InterruptedException e) {
        // Only a kill ends the pause: that is what it is for.
      }
    }
  }
}
