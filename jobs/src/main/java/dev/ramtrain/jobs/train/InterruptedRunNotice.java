package dev.ramtrain.jobs.train;

import dev.ramtrain.console.Printable;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * What a run says when the JVM stops under it (Ctrl-C, SIGTERM) before it ends: where it stopped
 * and how it continues, and its directory's lock released, run as a shutdown hook while the run
 * holds its directory. The training thread is not unwound there, so nothing else of the run's is
 * closed; the next open settles what it left, as after a kill.
 */
final class InterruptedRunNotice implements Runnable {
  private final Path run;
  private final AutoCloseable lock;
  private final PrintStream err;

  InterruptedRunNotice(Path run, AutoCloseable lock, PrintStream err) {
    this.run = run;
    this.lock = lock;
    this.err = err;
  }

  @Override
  public void run() {
    err.println(message());
    try {
      lock.close();
    } catch (Exception e) {
      err.println("ramtrain train: could not release the lock of " + run + ": " + e);
    }
  }

  /** The one line: the last checkpoint, and that --resume continues from it; or that none is. */
  String message() {
    Path latest = run.resolve(RunDirectory.CHECKPOINTS).resolve(Checkpoints.LATEST);
    String name = null;
    try {
      name = Files.isRegularFile(latest) ? Files.readString(latest, StandardCharsets.UTF_8) : null;
    } catch (IOException e) {
      // unreadable: said as no checkpoint
    }
    String where = Printable.of(run.toString());
    if (name == null || name.isBlank()) {
      return "ramtrain train: interrupted before the first checkpoint of "
          + where
          + ": nothing to resume (run the command again to start over)";
    }
    return "ramtrain train: interrupted; the last checkpoint of "
        + where
        + " is "
        + RunDirectory.CHECKPOINTS
        + "/"
        + Printable.of(name.strip())
        + ": the same command with --resume continues from it";
  }
}
