package dev.ramtrain.etl.dataset;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.time.Duration;
import java.util.Arrays;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One writer at a time in a directory (a dataset, a training run): the file {@value #FILE}, created
 * only if absent (O_EXCL on a local disk, the namenode's create-if-absent on HDFS), says who
 * writes: user, host, pid, process start, since when, for what. While it is held a heartbeat
 * refreshes its modification time, so a lock whose writer is gone can be told from a live one: on
 * the same host by the pid (and that process's start time, against pid reuse; a changed boot id
 * means a reboot), elsewhere by a heartbeat older than {@link #STALE_AFTER}. Such a lock is broken
 * by renaming it aside and checking that what was moved is what was judged stale, so of two writers
 * breaking it at once only one goes on.
 *
 * <p>Object stores without an atomic create-if-absent cannot keep this promise; there, one writer
 * at a time is the user's job.
 */
public final class DirectoryLock implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DirectoryLock.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  public static final String FILE = "_ramtrain.lock";

  /** A lock of another host whose heartbeat is older than this is taken to be abandoned. */
  public static final Duration STALE_AFTER = Duration.ofMinutes(2);

  /** How long a local lock may stay empty while its writer writes into it. */
  static final Duration EMPTY_LOCAL_GRACE = Duration.ofMillis(500);

  /** Breaking a lock takes milliseconds; a turn to break one held longer was left by a crash. */
  static final Duration BREAK_TIMEOUT = Duration.ofSeconds(30);

  private final HeldFile held;

  private DirectoryLock(HeldFile held) {
    this.held = held;
  }

  /**
   * Takes the lock of {@code dir} (which must exist) for {@code purpose}, or fails naming its
   * holder.
   */
  public static DirectoryLock acquire(Path dir, Configuration conf, String purpose)
      throws IOException {
    return acquire(dir, conf, purpose, STALE_AFTER);
  }

  static DirectoryLock acquire(Path dir, Configuration conf, String purpose, Duration staleAfter)
      throws IOException {
    FileSystem fs = DatasetFiles.fileSystem(dir, conf);
    Path file = new Path(dir, FILE);
    byte[] content = JSON.writeValueAsBytes(Holder.current(purpose));
    Found found = null;
    for (int attempt = 0; attempt < 50; attempt++) {
      HeldFile held = HeldFile.create(fs, file, content, "ramtrain-lock-heartbeat");
      if (held != null) {
        return new DirectoryLock(held);
      }
      found = read(fs, file);
      if (found == null) {
        continue; // released between our create and our read: try again
      }
      boolean local = DatasetFiles.isLocal(fs);
      String stale =
          local && found.content().length == 0
              ? emptyLocalLockStale(found)
              : Holder.staleReason(found.holder(), found.file().ageMillis(), staleAfter);
      if (stale == null && local && found.content().length == 0) {
        sleepBriefly(); // a writer between creating its lock and writing into it, or one killed
        // there
        continue;
      }
      if (stale == null) {
        throw new LockedException(dir, found.holder());
      }
      if (breakStale(fs, file, found)) {
        LOG.warn(
            "broke the lock of {} in {}: {}",
            found.holder() == null ? "an unknown writer" : found.holder().describe(),
            dir,
            stale);
      } else {
        sleepBriefly(); // another writer is breaking it this instant: see who ends up holding it
      }
    }
    throw new LockedException(dir, found == null ? null : found.holder());
  }

  /** Fails unless the lock file still is this lock's (nobody broke or replaced it). */
  public void checkHeld() throws IOException {
    if (!held.held()) {
      throw new IOException(
          "lost the writer's lock "
              + DatasetFiles.shown(held.file())
              + ": another process removed or replaced it; nothing was committed");
    }
  }

  /** Stops the heartbeat and removes the lock file if it is still this lock's. */
  @Override
  public void close() {
    held.close();
  }

  /** A lock file as read: its bytes and age, and its holder (null when unreadable). */
  private record Found(HeldFile.Found file, Holder holder) {
    byte[] content() {
      return file.content();
    }
  }

  private static Found read(FileSystem fs, Path file) throws IOException {
    HeldFile.Found found = HeldFile.read(fs, file);
    if (found == null) {
      return null;
    }
    Holder holder;
    try {
      holder = JSON.readValue(found.content(), Holder.class);
    } catch (JsonProcessingException e) {
      holder = null; // being written this instant, or damaged: judged by its age alone
    }
    return new Found(found, holder);
  }

  /**
   * A local lock file is created empty and written at once, microseconds apart: one still empty
   * after {@link #EMPTY_LOCAL_GRACE} belongs to a writer killed in between (a training run killed
   * at any instant must be resumable). Elsewhere a file can stay empty until closed, so an empty
   * lock is judged by its age as any other unreadable one.
   */
  private static String emptyLocalLockStale(Found found) {
    long age = found.file().ageMillis();
    return age > EMPTY_LOCAL_GRACE.toMillis()
        ? "it has stayed empty for " + age + " ms: its writer died while creating it"
        : null;
  }

  /**
   * Removes a lock judged stale, if it still is the one judged. Breakers take turns through a
   * second exclusive file, so that one breaker can never remove the fresh lock another breaker (or
   * a writer that found no lock) has just created. Returns false when another breaker holds the
   * turn.
   */
  private static boolean breakStale(FileSystem fs, Path file, Found stale) throws IOException {
    Path turn = new Path(file.getParent(), FILE + ".break");
    if (!HeldFile.createExclusively(fs, turn, new byte[0])) {
      HeldFile.Found other = HeldFile.read(fs, turn);
      if (other != null && other.ageMillis() > BREAK_TIMEOUT.toMillis()) {
        fs.delete(turn, false); // a breaker died within its few milliseconds: free the turn
      }
      return false;
    }
    try {
      Found now = read(fs, file);
      if (now != null && Arrays.equals(now.content(), stale.content())) {
        fs.delete(file, false);
      }
      return true;
    } finally {
      fs.delete(turn, false);
    }
  }

  private static void sleepBriefly() throws IOException {
    try {
      Thread.sleep(20);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while waiting for a directory lock", e);
    }
  }

  /** Another writer holds the directory's lock. */
  public static final class LockedException extends IOException {
    LockedException(Path dir, Holder holder) {
      super(
          DatasetFiles.shown(dir)
              + " is being written by another ramtrain process: "
              + (holder == null ? "an unknown writer" : holder.describe())
              + "; wait for it to finish (its lock is "
              + DatasetFiles.shown(new Path(dir, FILE))
              + ")");
    }
  }
}
