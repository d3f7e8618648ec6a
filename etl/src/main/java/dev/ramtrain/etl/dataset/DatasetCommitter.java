package dev.ramtrain.etl.dataset;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.files.PausePoints;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ManifestCodec;
import dev.ramtrain.format.ShardFormatException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes a dataset directory on any Hadoop filesystem so that a reader, whenever it looks and
 * however the writer died, sees no dataset, the old version, or the new one, whole; and so that
 * nothing ramtrain did not write is ever deleted.
 *
 * <pre>
 * begin   the output is new, empty, or a ramtrain dataset (never someone else's folder, never inside
 *         the input or around it) ▶ the writer's lock ({@link DirectoryLock}) ▶ clean what dead
 *         writers left: only folders carrying ramtrain's marker, and files its journal names
 *         ▶ _staging/RUN/{train,val}/ with the marker
 * tasks   write shards into _staging/RUN/ ({@link StagedShards})
 * commit  rejects list ▶ rename _staging/RUN to vNNNN ▶ journal the old version's files
 *         ▶ manifest.json replaced in one rename: the commit point ▶ old version's files deleted,
 *         unless a reader's {@link VersionLease} holds them: then its last reader, or the next
 *         writer, deletes them
 * close   without a commit the run's staging goes; the lock is released; an output folder this
 *         run created and left empty is removed
 * </pre>
 */
public final class DatasetCommitter implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DatasetCommitter.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final FileSystem fs;
  private final Configuration conf;
  private final Path dir;
  private final DirectoryLock lock;
  private final boolean createdDir;
  private final Manifest current;
  private final String runId;
  private final Path runDir;
  private final String version;
  private boolean committed;

  private DatasetCommitter(
      FileSystem fs,
      Configuration conf,
      Path dir,
      DirectoryLock lock,
      boolean createdDir,
      Manifest current,
      String runId,
      String version) {
    this.fs = fs;
    this.conf = conf;
    this.dir = dir;
    this.lock = lock;
    this.createdDir = createdDir;
    this.current = current;
    this.runId = runId;
    this.runDir = new Path(new Path(dir, DatasetLayout.STAGING), runId);
    this.version = version;
  }

  /**
   * Prepares {@code output} for a new version: refuses a committed dataset unless {@code
   * overwrite}, any folder that is neither empty nor a ramtrain dataset, and an output inside
   * {@code input} or around it ({@code input} may be null, or no filesystem path, e.g. a table).
   */
  public static DatasetCommitter begin(
      String output, String input, boolean overwrite, Configuration hadoopConf) throws IOException {
    Path given = new Path(output);
    FileSystem fs = DatasetFiles.fileSystem(given, hadoopConf);
    Path dir = fs.makeQualified(given);
    if (input != null) {
      OutputChecks.requireSeparate(input, dir, fs, hadoopConf);
    }
    boolean created = OutputChecks.createDirectory(fs, dir);
    DirectoryLock lock;
    try {
      lock = DirectoryLock.acquire(dir, hadoopConf, "preprocess");
    } catch (IOException | RuntimeException e) {
      if (created) {
        DatasetFiles.removeIfEmpty(fs, dir);
      }
      throw e;
    }
    try {
      Manifest current = readManifest(fs, dir);
      if (current != null && !overwrite) {
        throw new DatasetExistsException(
            output
                + " already holds a dataset (manifest.json); choose another output or set"
                + " ramtrain.etl.overwrite=true (--overwrite)");
      }
      VersionFolders.cleanUp(fs, dir, current);
      if (current == null) {
        OutputChecks.requireOnlyRamtrainEntries(fs, dir);
      }
      String version = DatasetLayout.versionFolder(VersionFolders.nextVersion(fs, dir, current));
      String runId = UUID.randomUUID().toString();
      DatasetCommitter committer =
          new DatasetCommitter(fs, hadoopConf, dir, lock, created, current, runId, version);
      committer.createRunDir();
      return committer;
    } catch (IOException | RuntimeException e) {
      lock.close();
      if (created) {
        DatasetFiles.removeIfEmpty(fs, dir);
      }
      throw e;
    }
  }

  /**
   * Where this run's tasks write (serializable, for the executors); {@code directIo}: local shards
   * past the page cache.
   */
  public StagedShards staging(boolean directIo) {
    return new StagedShards(runDir, new HadoopConf(conf), directIo);
  }

  /**
   * Publishes {@code manifest} (shard files relative to the run's folder, as staged) with {@code
   * rejectsJsonLines}, then removes the replaced version's files. Every shard it names must have
   * been staged.
   */
  public Manifest commit(Manifest manifest, byte[] rejectsJsonLines) throws IOException {
    lock.checkHeld();
    for (var split : manifest.splits().values()) {
      for (Manifest.Shard shard : split.shards()) {
        Path staged = new Path(runDir, shard.file());
        if (!fs.exists(staged)) {
          throw new IOException(
              "cannot commit " + dir + ": staged shard " + staged + " is missing");
        }
      }
    }
    if (manifest.rejects().file() != null) {
      DatasetFiles.write(fs, new Path(runDir, manifest.rejects().file()), rejectsJsonLines);
    }
    PausePoints.reach("preprocess.commit.staged");
    Path versionDir = new Path(dir, version);
    if (!fs.rename(runDir, versionDir)) {
      throw new IOException("cannot move the staged shards " + runDir + " to " + versionDir);
    }
    PausePoints.reach("preprocess.commit.moved");
    Manifest published = manifest.inFolder(version);
    List<String> retiring = current == null ? List.of() : VersionFolders.retiringFiles(current);
    Path staging = new Path(dir, DatasetLayout.STAGING);
    Path journal = VersionFolders.journal(dir, runId);
    if (!retiring.isEmpty()) {
      VersionFolders.writeJournal(fs, journal, retiring);
    }
    publish(ManifestCodec.toJson(published));
    committed = true;
    PausePoints.reach("preprocess.commit.published");
    if (!retiring.isEmpty()) {
      Set<String> kept =
          VersionFolders.retireUnheld(
              fs, dir, journal, retiring, published, VersionLease.heldEntries(fs, dir));
      if (!kept.isEmpty()) {
        LOG.info(
            "{} of {} kept while a reader reads it: removed when its last reader finishes, or by"
                + " the next preprocess",
            String.join(", ", kept),
            DatasetFiles.shown(dir));
      }
    }
    DatasetFiles.removeIfEmpty(fs, staging);
    return published;
  }

  /**
   * Ends the run: without a commit its staged files go. Then the lock is released, and an output
   * folder this run created is removed if nothing is left in it.
   */
  @Override
  public void close() {
    try {
      if (!committed) {
        fs.delete(runDir, true);
        DatasetFiles.removeIfEmpty(fs, new Path(dir, DatasetLayout.STAGING));
      }
    } catch (IOException e) {
      LOG.warn("could not remove the staged files {}: {}", runDir, e.toString());
    } finally {
      lock.close();
      if (createdDir) {
        try {
          DatasetFiles.removeIfEmpty(fs, dir);
        } catch (IOException e) {
          LOG.warn("could not remove the empty output {}: {}", dir, e.toString());
        }
      }
    }
  }

  private void createRunDir() throws IOException {
    for (String split : new String[] {Manifest.TRAIN, Manifest.VAL}) {
      Path folder = new Path(runDir, split);
      if (!fs.mkdirs(folder)) {
        throw new IOException("cannot create the staging folder " + folder);
      }
    }
    Map<String, Object> marker = new LinkedHashMap<>();
    marker.put("writer", "ramtrain preprocess");
    marker.put("run", runId);
    marker.put("started", Instant.now().toString());
    marker.put("pid", ProcessHandle.current().pid());
    DatasetFiles.write(
        fs, new Path(runDir, DatasetLayout.RUN_MARKER), JSON.writeValueAsBytes(marker));
  }

  private void publish(byte[] manifestJson) throws IOException {
    Path tmp =
        new Path(
            new Path(dir, DatasetLayout.STAGING), VersionFolders.MANIFEST_PREFIX + runId + ".json");
    Path target = new Path(dir, DatasetLayout.MANIFEST);
    DatasetFiles.replace(fs, tmp, target, manifestJson);
  }

  private static Manifest readManifest(FileSystem fs, Path dir) throws IOException {
    Path path = new Path(dir, DatasetLayout.MANIFEST);
    byte[] json;
    try (InputStream in = fs.open(path)) {
      json = in.readAllBytes();
    } catch (FileNotFoundException e) {
      return null;
    }
    try {
      return ManifestCodec.fromJson(json, path.toString());
    } catch (ShardFormatException e) {
      throw new UnsafeOutputException(
          e.getMessage()
              + "; ramtrain does not replace a dataset it cannot read: move it away or choose"
              + " another output");
    }
  }

  /** The output cannot be written without risking files that are not ramtrain's: a usage error. */
  public static class UnsafeOutputException extends IOException {
    public UnsafeOutputException(String message) {
      super(message);
    }
  }

  /** The output already holds a committed dataset and overwriting was not asked for. */
  public static final class DatasetExistsException extends UnsafeOutputException {
    public DatasetExistsException(String message) {
      super(message);
    }
  }
}
