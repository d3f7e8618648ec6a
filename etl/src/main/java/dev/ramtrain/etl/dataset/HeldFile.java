package dev.ramtrain.etl.dataset;

import dev.ramtrain.files.IoErrors;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A small file that says who holds something (a directory's lock, a reader's lease), created only
 * if absent, and kept fresh while held: a heartbeat refreshes its modification time as long as the
 * file still holds this holder's bytes, so a holder on another host that is gone can be told from a
 * live one by the file's age.
 */
final class HeldFile implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(HeldFile.class);
  static final Duration HEARTBEAT = Duration.ofSeconds(10);

  /** A file's bytes, as read, and when it was last refreshed. */
  record Found(byte[] content, long modifiedMillis) {
    long ageMillis() {
      return System.currentTimeMillis() - modifiedMillis;
    }
  }

  private final FileSystem fs;
  private final Path file;
  private final byte[] content;
  private final ScheduledExecutorService heartbeat;

  private HeldFile(FileSystem fs, Path file, byte[] content, String thread) {
    this.fs = fs;
    this.file = file;
    this.content = content;
    this.heartbeat =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, thread);
              t.setDaemon(true);
              return t;
            });
    long every = HEARTBEAT.toMillis();
    heartbeat.scheduleWithFixedDelay(this::beat, every, every, TimeUnit.MILLISECONDS);
  }

  /**
   * Creates {@code file} with {@code content} if nothing is there, and holds it (its heartbeat on a
   * daemon thread named {@code thread}); null when a file is there already.
   */
  static HeldFile create(FileSystem fs, Path file, byte[] content, String thread)
      throws IOException {
    return createExclusively(fs, file, content) ? new HeldFile(fs, file, content, thread) : null;
  }

  Path file() {
    return file;
  }

  /** Whether the file still holds this holder's bytes (nobody removed or replaced it). */
  boolean held() throws IOException {
    Found now = read(fs, file);
    return now != null && Arrays.equals(now.content(), content);
  }

  /** Stops the heartbeat and removes the file if it still is this holder's. */
  @Override
  public void close() {
    heartbeat.shutdownNow();
    try {
      if (held()) {
        fs.delete(file, false);
      }
    } catch (IOException e) {
      LOG.warn("could not remove {}: {}", DatasetFiles.shown(file), e.toString());
    }
  }

  private void beat() {
    try {
      if (held()) {
        touch(fs, file);
      } else {
        LOG.error("{} was removed or replaced by another process", DatasetFiles.shown(file));
      }
    } catch (IOException | RuntimeException e) {
      LOG.warn("heartbeat on {} failed: {}", DatasetFiles.shown(file), e.toString());
    }
  }

  /** The file's bytes and age, or null when there is no such file. */
  static Found read(FileSystem fs, Path file) throws IOException {
    try (InputStream in = fs.open(file)) {
      byte[] bytes = in.readAllBytes();
      return new Found(bytes, fs.getFileStatus(file).getModificationTime());
    } catch (FileNotFoundException | NoSuchFileException e) {
      return null;
    }
  }

  /** Creates {@code file} with {@code content} unless something is there; false if it is. */
  static boolean createExclusively(FileSystem fs, Path file, byte[] content) throws IOException {
    if (DatasetFiles.isLocal(fs)) {
      try (OutputStream out =
          Files.newOutputStream(DatasetFiles.local(fs, file), StandardOpenOption.CREATE_NEW)) {
        out.write(content);
        return true;
      } catch (FileAlreadyExistsException e) {
        return false;
      } catch (IOException e) {
        throw new IOException(
            "cannot create " + DatasetFiles.shown(file) + ": " + IoErrors.reason(e), e);
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
          "cannot create " + DatasetFiles.shown(file) + ": " + IoErrors.reason(e), e);
    }
  }

  private static void touch(FileSystem fs, Path file) throws IOException {
    if (DatasetFiles.isLocal(fs)) {
      Files.setLastModifiedTime(DatasetFiles.local(fs, file), FileTime.from(Instant.now()));
    } else {
      fs.setTimes(file, System.currentTimeMillis(), -1);
    }
  }
}
