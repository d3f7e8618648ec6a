package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.dataset.DirectoryLock;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A run directory on a Hadoop filesystem that is not this machine's disk (HDFS, S3A, ...), seen
 * from the rank that writes it: the run trains into a local staging copy ({@link RunDirectory},
 * unchanged) and each checkpoint it saves is published to the remote directory — the checkpoint's
 * folder under a temporary name then renamed, then {@code metrics.jsonl}, then {@code
 * checkpoints/latest} last — so a reader there (another rank resuming, the driver writing the
 * report) never takes a half-published checkpoint for the latest. The remote directory's lock is
 * held meanwhile. Closing publishes the last metrics and deletes the staging copy, which this class
 * created.
 *
 * <p>A new run needs a remote directory without a run; {@code --resume} fetches the latest
 * checkpoint and the metrics into the staging copy first. Replacing a remote run ({@code
 * --overwrite}) is refused: choose a new directory.
 */
public final class RemoteRun implements RunDirectory.CheckpointPublisher, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RemoteRun.class);
  private static final String CHECKPOINTS = RunDirectory.CHECKPOINTS;
  private static final String PUBLISHING = ".publishing-";

  /** Names the job that started a new run here, so that its retry may clear what it published. */
  static final String JOB_MARKER = ".ramtrain-job";

  private final FileSystem fs;
  private final Path root;
  private final java.nio.file.Path staging;
  private final DirectoryLock lock;
  private final int keepCheckpoints; // as the staging copy's RunDirectory keeps them
  private boolean published; // a checkpoint is there: the metrics go with it

  private RemoteRun(
      FileSystem fs,
      Path root,
      java.nio.file.Path staging,
      DirectoryLock lock,
      int keepCheckpoints,
      boolean resumed) {
    this.fs = fs;
    this.root = root;
    this.staging = staging;
    this.lock = lock;
    this.keepCheckpoints = keepCheckpoints;
    this.published = resumed;
  }

  /**
   * Takes the remote run directory {@code output} for a run of job {@code job} in its mode and
   * prepares the local staging copy the run opens as its {@link RunDirectory}. A new run finding
   * what an earlier attempt of the same job published (before its first checkpoint was complete)
   * clears it; anything else there is refused.
   */
  public static RemoteRun open(JobSpec.Output output, Configuration conf, String job)
      throws IOException {
    Path root = new Path(output.dir());
    FileSystem fs = root.getFileSystem(conf);
    if (output.mode() == RunDirectory.Mode.OVERWRITE) {
      throw new ConfigException(
          "ramtrain.train.overwrite: replacing a run in "
              + output.dir()
              + " is done on a local run directory only; choose a new directory there");
    }
    boolean created = !fs.exists(root);
    fs.mkdirs(root);
    DirectoryLock lock;
    try {
      lock = DirectoryLock.acquire(root, conf, "train");
    } catch (IOException | RuntimeException e) {
      removeIfEmpty(fs, root, created);
      throw e;
    }
    java.nio.file.Path staging = null;
    try {
      boolean holdsRun =
          fs.exists(new Path(root, CHECKPOINTS)) || fs.exists(new Path(root, RunDirectory.METRICS));
      boolean resumed = output.mode() == RunDirectory.Mode.RESUME;
      if (!resumed && holdsRun && job.equals(readMarker(fs, root))) {
        clearAttempt(fs, root);
        holdsRun = false;
      }
      staging = Files.createTempDirectory("ramtrain-run-");
      if (output.mode() == RunDirectory.Mode.RESUME) {
        if (!fetchLatest(fs, root, staging)) {
          throw new ConfigException(
              "--resume: "
                  + output.dir()
                  + " has no checkpoint to resume from; leave out --resume to start a new run");
        }
        Path metrics = new Path(root, RunDirectory.METRICS);
        if (fs.exists(metrics)) {
          fs.copyToLocalFile(
              false, metrics, new Path(staging.resolve(RunDirectory.METRICS).toUri()), true);
        }
        journalEverything(staging); // a copy this class made: all of it is the run's
      } else if (holdsRun) {
        throw new ConfigException(
            "ramtrain.train.output = "
                + output.dir()
                + " already holds a training run: --resume continues it, or choose a new"
                + " directory");
      } else {
        try (FSDataOutputStream out = fs.create(new Path(root, JOB_MARKER), true)) {
          out.write(job.getBytes(StandardCharsets.UTF_8));
        }
      }
      return new RemoteRun(fs, root, staging, lock, output.keepCheckpoints(), resumed);
    } catch (IOException | RuntimeException e) {
      lock.close();
      if (staging != null) {
        deleteLocal(staging);
      }
      removeIfEmpty(fs, root, created);
      throw e;
    }
  }

  /** Removes the run directory this run created if a refusal left nothing in it. */
  private static void removeIfEmpty(FileSystem fs, Path root, boolean created) {
    try {
      if (created && fs.listStatus(root).length == 0) {
        fs.delete(root, false);
      }
    } catch (IOException e) {
      LOG.warn("could not remove the empty run directory {}: {}", root, e.toString());
    }
  }

  private static String readMarker(FileSystem fs, Path root) throws IOException {
    Path marker = new Path(root, JOB_MARKER);
    if (!fs.exists(marker)) {
      return null;
    }
    try (var in = fs.open(marker)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
    }
  }

  /** Deletes what an attempt of this run's job published: its checkpoints and metrics. */
  private static void clearAttempt(FileSystem fs, Path root) throws IOException {
    fs.delete(new Path(root, CHECKPOINTS), true);
    fs.delete(new Path(root, RunDirectory.METRICS), false);
    fs.delete(new Path(root, PUBLISHING + RunDirectory.METRICS), false);
    LOG.info("cleared what a failed attempt of this run published in {}", root);
  }

  /** The local copy the run trains into (open it as a {@link RunDirectory} in the same mode). */
  public java.nio.file.Path staging() {
    return staging;
  }

  /**
   * Publishes checkpoint {@code saved} (a folder of the staging copy's checkpoints), then the
   * metrics so far, then makes it the remote run's latest.
   */
  @Override
  public void publish(java.nio.file.Path saved) throws IOException {
    String name = saved.getFileName().toString();
    Path checkpoints = new Path(root, CHECKPOINTS);
    fs.mkdirs(checkpoints);
    Path publishing = new Path(checkpoints, PUBLISHING + name);
    fs.delete(publishing, true); // an earlier attempt's, killed while publishing
    fs.copyFromLocalFile(false, true, new Path(saved.toUri()), publishing);
    Path target = new Path(checkpoints, name);
    // A retried attempt saves a checkpoint of this run again under its own name.
    fs.delete(target, true);
    rename(publishing, target);
    publishMetrics();
    writeReplacing(new Path(checkpoints, Checkpoints.LATEST), name);
    published = true;
    LOG.info("published checkpoint {} to {}", name, target);
    prune();
  }

  /** Makes published checkpoint {@code name} the remote run's best ({@code checkpoints/best}). */
  @Override
  public void publishBest(String name) throws IOException {
    writeReplacing(new Path(new Path(root, CHECKPOINTS), Checkpoints.BEST), name);
    prune();
  }

  /**
   * Removes the published checkpoints the run no longer keeps ({@link CheckpointRetention}, as the
   * staging copy does), earlier attempts' and runs' included: only folders holding nothing but a
   * checkpoint's own files; a folder with anything else is left, and said so.
   */
  private void prune() throws IOException {
    Path checkpoints = new Path(root, CHECKPOINTS);
    List<String> names = new ArrayList<>();
    for (FileStatus s : fs.listStatus(checkpoints)) {
      if (s.isDirectory()) {
        names.add(s.getPath().getName());
      }
    }
    List<String> dropped =
        CheckpointRetention.dropped(
            names,
            keepCheckpoints,
            pointer(new Path(checkpoints, Checkpoints.LATEST)),
            pointer(new Path(checkpoints, Checkpoints.BEST)));
    for (String name : dropped) {
      Path folder = new Path(checkpoints, name);
      boolean onlyCheckpointFiles = true;
      for (FileStatus f : fs.listStatus(folder)) {
        String file = f.getPath().getName();
        onlyCheckpointFiles &=
            f.isFile() && (Checkpoints.FILES.contains(file) || file.equals(Checkpoints.AVERAGED));
      }
      if (!onlyCheckpointFiles) {
        LOG.warn("{}: holds files ramtrain did not write; left as it is", folder);
        continue;
      }
      fs.delete(folder, true);
      LOG.info("removed the published checkpoint {}: not kept", folder);
    }
  }

  /** The checkpoint a pointer file names, or null. */
  private String pointer(Path file) throws IOException {
    if (!fs.exists(file)) {
      return null;
    }
    try (var in = fs.open(file)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
    }
  }

  /** Copies the staging copy's metrics over the remote run's (whose lines it continues). */
  private void publishMetrics() throws IOException {
    java.nio.file.Path metrics = staging.resolve(RunDirectory.METRICS);
    if (!Files.exists(metrics)) {
      return;
    }
    Path tmp = new Path(root, PUBLISHING + RunDirectory.METRICS);
    fs.copyFromLocalFile(false, true, new Path(metrics.toUri()), tmp);
    Path target = new Path(root, RunDirectory.METRICS);
    fs.delete(target, false);
    rename(tmp, target);
  }

  private void writeReplacing(Path target, String text) throws IOException {
    Path tmp = new Path(target.getParent(), PUBLISHING + target.getName());
    try (FSDataOutputStream out = fs.create(tmp, true)) {
      out.write(text.getBytes(StandardCharsets.UTF_8));
    }
    fs.delete(target, false);
    rename(tmp, target);
  }

  private void rename(Path from, Path to) throws IOException {
    if (!fs.rename(from, to)) {
      throw new IOException("could not rename " + from + " to " + to);
    }
  }

  /** Publishes the last metrics, releases the remote directory and deletes the staging copy. */
  @Override
  public void close() {
    try {
      if (published) {
        publishMetrics();
      }
    } catch (IOException e) {
      LOG.error("could not publish the final metrics to {}: {}", root, e.toString());
    } finally {
      lock.close();
      deleteLocal(staging);
    }
  }

  /** Reads a run directory (a local copy) for {@link #readLatest}. */
  @FunctionalInterface
  public interface LocalReader<T> {
    T read(java.nio.file.Path runDir) throws IOException;
  }

  /**
   * What {@code reader} makes of the remote run {@code output}'s latest checkpoint, copied with
   * {@code checkpoints/latest} into a local folder laid out as a run directory (deleted
   * afterwards); null when the run has no checkpoint yet.
   */
  public static <T> T readLatest(JobSpec.Output output, Configuration conf, LocalReader<T> reader)
      throws IOException {
    Path root = new Path(output.dir());
    FileSystem fs = root.getFileSystem(conf);
    java.nio.file.Path local = Files.createTempDirectory("ramtrain-checkpoint-");
    try {
      return fetchLatest(fs, root, local) ? reader.read(local) : null;
    } finally {
      deleteLocal(local);
    }
  }

  private static boolean fetchLatest(FileSystem fs, Path root, java.nio.file.Path local)
      throws IOException {
    Path latest = new Path(new Path(root, CHECKPOINTS), Checkpoints.LATEST);
    if (!fs.exists(latest)) {
      return false;
    }
    String name;
    try (var in = fs.open(latest)) {
      name = new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
    }
    if (!Checkpoints.isName(name)) {
      throw new IOException(latest + " names '" + name + "', not a checkpoint folder");
    }
    java.nio.file.Path checkpoints = Files.createDirectories(local.resolve(CHECKPOINTS));
    fs.copyToLocalFile(
        false,
        new Path(new Path(root, CHECKPOINTS), name),
        new Path(checkpoints.resolve(name).toUri()),
        true);
    Files.writeString(checkpoints.resolve(Checkpoints.LATEST), name);
    return true;
  }

  /** Records every file of the staging copy in its {@link RunJournal}: this class wrote them. */
  private static void journalEverything(java.nio.file.Path staging) throws IOException {
    try (Stream<java.nio.file.Path> walk = Files.walk(staging)) {
      RunJournal.of(staging)
          .record(walk.filter(Files::isRegularFile).toArray(java.nio.file.Path[]::new));
    }
  }

  /** Deletes a local folder this class created. */
  public static void deleteLocal(java.nio.file.Path dir) {
    try (Stream<java.nio.file.Path> walk = Files.walk(dir)) {
      for (java.nio.file.Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    } catch (IOException e) {
      LOG.warn("could not delete the local copy {}: {}", dir, e.toString());
    }
  }
}
