package dev.ramtrain.etl.dataset;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.files.IoErrors;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.UUID;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
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
  static final Duration HEARTBEAT = Duration.ofSeconds(10);

  /** A lock of another host whose heartbeat is older than this is taken to be abandoned. */
  public static final Duration STALE_AFTER = Duration.ofMinutes(2);

  /** How long a local lock may stay empty while its writer writes into it. */
  static final Duration EMPTY_LOCAL_GRACE = Duration.ofMillis(500);

  /** Breaking a lock takes milliseconds; a turn to break one held longer was left by a crash. */
  static final Duration BREAK_TIMEOUT = Duration.ofSeconds(30);

  /** Who holds a lock, as its file says. */
  public record Holder(
      String id,
      String user,
      String host,
      String bootId,
      long pid,
      String processStart,
      String since,
      String purpose) {

    static Holder current(String purpose) {
      ProcessHandle self = ProcessHandle.current();
      return new Holder(
          UUID.randomUUID().toString(),
          System.getProperty("user.name"),
          currentHost(),
          currentBootId(),
          self.pid(),
          self.info().startInstant().map(Instant::toString).orElse(null),
          Instant.now().toString(),
          purpose);
    }

    /** How a person recognises the holder. */
    public String describe() {
      return String.format(
          "%s (pid %d of user %s on host %s, since %s)", purpose, pid, user, host, since);
    }
  }

  private final FileSystem fs;
  private final Path file;
  private final byte[] content;
  private final ScheduledExecutorService heartbeat;

  private DirectoryLock(FileSystem fs, Path file, byte[] content) {
    this.fs = fs;
    this.file = file;
    this.content = content;
    this.heartbeat =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "ramtrain-lock-heartbeat");
              t.setDaemon(true);
              return t;
            });
    long every = HEARTBEAT.toMillis();
    heartbeat.scheduleWithFixedDelay(this::beat, every, every, TimeUnit.MILLISECONDS);
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
      if (createExclusively(fs, file, content)) {
        return new DirectoryLock(fs, file, content);
      }
      found = read(fs, file);
      if (found == null) {
        continue; // released between our create and our read: try again
      }
      boolean local = DatasetFiles.isLocal(fs);
      String stale =
          local && found.content().length == 0
              ? emptyLocalLockStale(found)
              : staleReason(found, staleAfter);
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
    Found now = read(fs, file);
    if (now == null || !Arrays.equals(now.content(), content)) {
      throw new IOException(
          "lost the writer's lock "
              + DatasetFiles.shown(file)
              + ": another process removed or replaced it; nothing was committed");
    }
  }

  /** Stops the heartbeat and removes the lock file if it is still this lock's. */
  @Override
  public void close() {
    heartbeat.shutdownNow();
    try {
      Found now = read(fs, file);
      if (now != null && Arrays.equals(now.content(), content)) {
        fs.delete(file, false);
      }
    } catch (IOException e) {
      LOG.warn("could not remove the lock {}: {}", file, e.toString());
    }
  }

  private void beat() {
    try {
      Found now = read(fs, file);
      if (now != null && Arrays.equals(now.content(), content)) {
        touch(fs, file);
      } else {
        LOG.error("the lock {} was removed or replaced by another process", file);
      }
    } catch (IOException | RuntimeException e) {
      LOG.warn("lock heartbeat on {} failed: {}", file, e.toString());
    }
  }

  /** A lock file's bytes, what they say (null when unreadable) and when it was last refreshed. */
  record Found(byte[] content, Holder holder, long modifiedMillis) {}

  private static Found read(FileSystem fs, Path file) throws IOException {
    byte[] bytes;
    long modified;
    try (InputStream in = fs.open(file)) {
      bytes = in.readAllBytes();
      modified = fs.getFileStatus(file).getModificationTime();
    } catch (FileNotFoundException | NoSuchFileException e) {
      return null;
    }
    Holder holder;
    try {
      holder = JSON.readValue(bytes, Holder.class);
    } catch (JsonProcessingException e) {
      holder = null; // being written this instant, or damaged: judged by its age alone
    }
    return new Found(bytes, holder, modified);
  }

  /**
   * A local lock file is created empty and written at once, microseconds apart: one still empty
   * after {@link #EMPTY_LOCAL_GRACE} belongs to a writer killed in between (a training run killed
   * at any instant must be resumable). Elsewhere a file can stay empty until closed, so an empty
   * lock is judged by its age as any other unreadable one.
   */
  private static String emptyLocalLockStale(Found found) {
    long age = System.currentTimeMillis() - found.modifiedMillis();
    return age > EMPTY_LOCAL_GRACE.toMillis()
        ? "it has stayed empty for " + age + " ms: its writer died while creating it"
        : null;
  }

  /** Why the lock's writer is known to be gone, or null while it may still be alive. */
  static String staleReason(Found found, Duration staleAfter) {
    Holder h = found.holder();
    if (h != null && h.host() != null && h.host().equals(currentHost())) {
      String boot = currentBootId();
      if (h.bootId() != null && boot != null && !h.bootId().equals(boot)) {
        return "its host " + h.host() + " has restarted since";
      }
      if (!alive(h.pid(), h.processStart())) {
        return "its process " + h.pid() + " on this host is no longer running";
      }
      return null; // alive here, however old its heartbeat (a stopped process still writes later)
    }
    long age = System.currentTimeMillis() - found.modifiedMillis();
    if (age > staleAfter.toMillis()) {
      return "no heartbeat for " + Duration.ofMillis(age).toSeconds() + " s";
    }
    return null;
  }

  private static boolean alive(long pid, String processStart) {
    return ProcessHandle.of(pid)
        .map(
            p -> {
              if (processStart == null) {
                return true;
              }
              Instant recorded = Instant.parse(processStart);
              return p.info()
                  .startInstant()
                  .map(s -> Math.abs(Duration.between(s, recorded).toMillis()) < 1000)
                  .orElse(true);
            })
        .orElse(false);
  }

  /**
   * Removes a lock judged stale, if it still is the one judged. Breakers take turns through a
   * second exclusive file, so that one breaker can never remove the fresh lock another breaker (or
   * a writer that found no lock) has just created. Returns false when another breaker holds the
   * turn.
   */
  private static boolean breakStale(FileSystem fs, Path file, Found stale) throws IOException {
    Path turn = new Path(file.getParent(), FILE + ".break");
    if (!createExclusively(fs, turn, new byte[0])) {
      Found other = read(fs, turn);
      if (other != null
          && System.currentTimeMillis() - other.modifiedMillis() > BREAK_TIMEOUT.toMillis()) {
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

  private static boolean createExclusively(FileSystem fs, Path file, byte[] content)
      throws IOException {
    if (DatasetFiles.isLocal(fs)) {
      try (OutputStream out =
          Files.newOutputStream(DatasetFiles.local(fs, file), StandardOpenOption.CREATE_NEW)) {
        out.write(content);
        return true;
      } catch (FileAlreadyExistsException e) {
        return false;
      } catch (IOException e) {
        throw new IOException(
            "cannot create the lock file " + DatasetFiles.shown(file) + ": " + IoErrors.reason(e),
            e);
      }
    }
    try (OutputStream out = fs.create(file, false)) {
      out.write(content);
      return true;
    } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
      return false;
    } catch (IOException e) {
      if (fs.exists(file)) {
        return false; // some filesystems report an existing file with a plain IOException
      }
      throw new IOException(
          "cannot create the lock file " + DatasetFiles.shown(file) + ": " + IoErrors.reason(e), e);
    }
  }

  private static void touch(FileSystem fs, Path file) throws IOException {
    if (DatasetFiles.isLocal(fs)) {
      Files.setLastModifiedTime(DatasetFiles.local(fs, file), FileTime.from(Instant.now()));
    } else {
      fs.setTimes(file, System.currentTimeMillis(), -1);
    }
  }

  private static String currentHost() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      String env = System.getenv("HOSTNAME");
      return env == null ? "unknown-host" : env;
    }
  }

  private static String currentBootId() {
    try {
      return Files.readString(Paths.get("/proc/sys/kernel/random/boot_id")).strip();
    } catch (IOException | RuntimeException e) {
      return null;
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
