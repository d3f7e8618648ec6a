package dev.ramtrain.etl.dataset;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.etl.progress.PausePoints;
import dev.ramtrain.etl.shard.IoErrors;
import dev.ramtrain.etl.shard.Manifest;
import dev.ramtrain.etl.shard.ManifestCodec;
import dev.ramtrain.etl.shard.SafePaths;
import dev.ramtrain.etl.shard.ShardFormatException;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSError;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
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
 *         ▶ manifest.json replaced in one rename: the commit point ▶ old version's files deleted
 * close   without a commit the run's staging goes; the lock is released; an output folder this
 *         run created and left empty is removed
 * </pre>
 */
public final class DatasetCommitter implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DatasetCommitter.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String RETIRE_PREFIX = "retire-";
  private static final String MANIFEST_PREFIX = "manifest-";

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
    FileSystem fs = fileSystem(given, hadoopConf);
    Path dir = fs.makeQualified(given);
    if (input != null) {
      requireSeparate(input, dir, fs, hadoopConf);
    }
    boolean created = createDirectory(fs, dir);
    DirectoryLock lock;
    try {
      lock = DirectoryLock.acquire(dir, hadoopConf, "preprocess");
    } catch (IOException | RuntimeException e) {
      if (created) {
        removeIfEmpty(fs, dir);
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
      cleanUp(fs, dir, current);
      if (current == null) {
        requireOnlyRamtrainEntries(fs, dir);
      }
      String version = DatasetLayout.versionFolder(nextVersion(fs, dir, current));
      String runId = UUID.randomUUID().toString();
      DatasetCommitter committer =
          new DatasetCommitter(fs, hadoopConf, dir, lock, created, current, runId, version);
      committer.createRunDir();
      return committer;
    } catch (IOException | RuntimeException e) {
      lock.close();
      if (created) {
        removeIfEmpty(fs, dir);
      }
      throw e;
    }
  }

  /** The dataset directory, qualified. */
  public String output() {
    return dir.toString();
  }

  /** Where this run's tasks write (serializable, for the executors). */
  public StagedShards staging() {
    return new StagedShards(runDir, new HadoopConf(conf));
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
      write(fs, new Path(runDir, manifest.rejects().file()), rejectsJsonLines);
    }
    PausePoints.reach("preprocess.commit.staged");
    Path versionDir = new Path(dir, version);
    if (!fs.rename(runDir, versionDir)) {
      throw new IOException("cannot move the staged shards " + runDir + " to " + versionDir);
    }
    PausePoints.reach("preprocess.commit.moved");
    Manifest published = manifest.inFolder(version);
    List<String> retiring = current == null ? List.of() : retiringFiles(current);
    Path staging = new Path(dir, DatasetLayout.STAGING);
    Path journal = new Path(staging, RETIRE_PREFIX + runId + ".json");
    if (!retiring.isEmpty()) {
      write(fs, journal, JSON.writeValueAsBytes(retiring));
    }
    publish(ManifestCodec.toJson(published));
    committed = true;
    PausePoints.reach("preprocess.commit.published");
    retire(fs, dir, retiring, published);
    if (!retiring.isEmpty()) {
      fs.delete(journal, false);
    }
    removeIfEmpty(fs, staging);
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
        removeIfEmpty(fs, new Path(dir, DatasetLayout.STAGING));
      }
    } catch (IOException e) {
      LOG.warn("could not remove the staged files {}: {}", runDir, e.toString());
    } finally {
      lock.close();
      if (createdDir) {
        try {
          removeIfEmpty(fs, dir);
        } catch (IOException e) {
          LOG.warn("could not remove the empty output {}: {}", dir, e.toString());
        }
      }
    }
  }

  /**
   * The filesystem of {@code path}; for local paths the raw one, so no {@code .crc} sidecar files
   * clutter the dataset (every shard has its CRC32C in the manifest).
   */
  static FileSystem fileSystem(Path path, Configuration conf) throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    return fs instanceof LocalFileSystem local ? local.getRawFileSystem() : fs;
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
    write(fs, new Path(runDir, DatasetLayout.RUN_MARKER), JSON.writeValueAsBytes(marker));
  }

  private void publish(byte[] manifestJson) throws IOException {
    Path tmp = new Path(new Path(dir, DatasetLayout.STAGING), MANIFEST_PREFIX + runId + ".json");
    Path target = new Path(dir, DatasetLayout.MANIFEST);
    write(fs, tmp, manifestJson);
    if (DirectoryLock.isLocal(fs)) {
      Files.move(
          DirectoryLock.local(fs, tmp),
          DirectoryLock.local(fs, target),
          StandardCopyOption.ATOMIC_MOVE,
          StandardCopyOption.REPLACE_EXISTING);
      return;
    }
    try {
      FileContext.getFileContext(fs.getUri(), conf).rename(tmp, target, Options.Rename.OVERWRITE);
    } catch (UnsupportedFileSystemException e) {
      // No FileContext for this scheme: replace in two steps (readers may briefly find none).
      fs.delete(target, false);
      if (!fs.rename(tmp, target)) {
        throw new IOException("cannot publish " + target);
      }
    }
  }

  private static boolean createDirectory(FileSystem fs, Path dir) throws IOException {
    FileStatus status = status(fs, dir);
    if (status != null) {
      if (!status.isDirectory()) {
        throw new UnsafeOutputException(shown(dir) + " exists and is not a directory");
      }
      return false;
    }
    try {
      if (DirectoryLock.isLocal(fs)) {
        Files.createDirectories(DirectoryLock.local(fs, dir));
      } else if (!fs.mkdirs(dir)) {
        throw new IOException("the filesystem refused");
      }
    } catch (IOException e) {
      throw new IOException(
          "cannot create the output directory " + shown(dir) + ": " + IoErrors.reason(e), e);
    }
    return true;
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

  /** Finishes what dead writers left: their journals, staging folders and uncommitted versions. */
  private static void cleanUp(FileSystem fs, Path dir, Manifest current) throws IOException {
    Path staging = new Path(dir, DatasetLayout.STAGING);
    if (fs.exists(staging)) {
      for (FileStatus s : fs.listStatus(staging)) {
        String name = s.getPath().getName();
        if (s.isFile() && name.startsWith(RETIRE_PREFIX) && name.endsWith(".json")) {
          List<String> files = readJournal(fs, s.getPath());
          LOG.info("finishing the replacement that {} journaled", s.getPath());
          retire(fs, dir, files, current);
          fs.delete(s.getPath(), false);
        }
      }
      for (FileStatus s : fs.listStatus(staging)) {
        String name = s.getPath().getName();
        boolean ours =
            s.isDirectory()
                ? hasMarker(fs, s.getPath()) || fs.listStatus(s.getPath()).length == 0
                : name.startsWith(MANIFEST_PREFIX) && name.endsWith(".json");
        if (ours) {
          LOG.info("removing {}, left by a preprocessing run that did not commit", s.getPath());
          fs.delete(s.getPath(), true);
        } else {
          LOG.warn("leaving {}: not written by ramtrain", s.getPath());
        }
      }
      removeIfEmpty(fs, staging);
    }
    Set<String> referenced = topFolders(current);
    for (FileStatus s : fs.listStatus(dir)) {
      String name = s.getPath().getName();
      if (s.isDirectory()
          && DatasetLayout.versionNumber(name) >= 0
          && !referenced.contains(name)
          && hasMarker(fs, s.getPath())) {
        LOG.info("removing {}, written by a preprocessing run that did not commit", s.getPath());
        fs.delete(s.getPath(), true);
      }
    }
  }

  private static void requireOnlyRamtrainEntries(FileSystem fs, Path dir) throws IOException {
    List<String> foreign = new ArrayList<>();
    for (FileStatus s : fs.listStatus(dir)) {
      String name = s.getPath().getName();
      boolean ours =
          name.equals(DirectoryLock.FILE)
              || name.equals(DatasetLayout.STAGING)
              || (s.isDirectory()
                  && DatasetLayout.versionNumber(name) >= 0
                  && hasMarker(fs, s.getPath()));
      if (!ours) {
        foreign.add(name);
      }
    }
    if (!foreign.isEmpty()) {
      foreign.sort(null);
      throw new UnsafeOutputException(
          shown(dir)
              + " is not empty and holds no ramtrain dataset (no manifest.json; it has "
              + String.join(", ", foreign.subList(0, Math.min(5, foreign.size())))
              + (foreign.size() > 5 ? ", ..." : "")
              + "): ramtrain writes a dataset only into a new or empty directory or over one of"
              + " its own, and deletes nothing it did not write; choose another output");
    }
  }

  private static void requireSeparate(String input, Path output, FileSystem fs, Configuration conf)
      throws IOException {
    String in;
    try {
      Path path = new Path(input);
      FileSystem inputFs = fileSystem(path, conf);
      if (!inputFs.exists(path)) {
        return; // the source reports a missing input itself
      }
      in = canonical(inputFs, inputFs.makeQualified(path));
    } catch (IOException | IllegalArgumentException e) {
      return; // not a filesystem path (a table name): nothing to overlap
    }
    String out = canonical(fs, output);
    if (out.equals(in) || out.startsWith(in + "/")) {
      throw new UnsafeOutputException(
          "ramtrain.etl.output "
              + shown(output)
              + " is inside the input "
              + input
              + ": the dataset would be written among the files it is read from; choose an output"
              + " outside the input");
    }
    if (in.startsWith(out + "/")) {
      throw new UnsafeOutputException(
          "the input "
              + input
              + " is inside ramtrain.etl.output "
              + shown(output)
              + ": writing the dataset there could replace the input; choose an output outside"
              + " the input");
    }
  }

  /** A path's URI with symbolic links resolved where the filesystem is local. */
  private static String canonical(FileSystem fs, Path qualified) throws IOException {
    if (!DirectoryLock.isLocal(fs)) {
      return trimSlash(qualified.toUri().toString());
    }
    java.nio.file.Path p = DirectoryLock.local(fs, qualified).normalize();
    java.nio.file.Path existing = p;
    while (existing != null && !Files.exists(existing)) {
      existing = existing.getParent();
    }
    if (existing == null) {
      return trimSlash(p.toString());
    }
    return trimSlash(existing.toRealPath().resolve(existing.relativize(p)).toString());
  }

  /** A path as a person reads it: local ones without their {@code file:} scheme. */
  public static String shown(Path path) {
    return "file".equals(path.toUri().getScheme()) ? path.toUri().getPath() : path.toString();
  }

  private static String trimSlash(String s) {
    return s.length() > 1 && s.endsWith("/") ? s.substring(0, s.length() - 1) : s;
  }

  private static int nextVersion(FileSystem fs, Path dir, Manifest current) throws IOException {
    int highest = 0;
    for (FileStatus s : fs.listStatus(dir)) {
      highest = Math.max(highest, DatasetLayout.versionNumber(s.getPath().getName()));
    }
    for (String folder : topFolders(current)) {
      highest = Math.max(highest, DatasetLayout.versionNumber(folder));
    }
    return highest + 1;
  }

  /** The version folders a manifest's files are in (none for a dataset of the flat layout). */
  private static Set<String> topFolders(Manifest m) {
    Set<String> folders = new TreeSet<>();
    if (m != null) {
      for (String file : m.files()) {
        int slash = file.indexOf('/');
        if (slash > 0 && DatasetLayout.versionNumber(file.substring(0, slash)) >= 0) {
          folders.add(file.substring(0, slash));
        }
      }
    }
    return folders;
  }

  /** What replacing {@code old} deletes: its files and the markers of its version folders. */
  private static List<String> retiringFiles(Manifest old) {
    List<String> files = new ArrayList<>(old.files());
    for (String folder : topFolders(old)) {
      files.add(folder + "/" + DatasetLayout.RUN_MARKER);
    }
    return files;
  }

  /**
   * Deletes {@code files} (relative to {@code dir}) that {@code keep} does not name, then the
   * folders that held them if nothing else is left in them.
   */
  private static void retire(FileSystem fs, Path dir, List<String> files, Manifest keep)
      throws IOException {
    Set<String> kept = new HashSet<>(keep == null ? List.of() : keep.files());
    Set<String> folders =
        new TreeSet<>(Comparator.comparingInt(String::length).reversed().thenComparing(s -> s));
    for (String file : files) {
      if (kept.contains(file)) {
        continue;
      }
      fs.delete(new Path(dir, file), false);
      for (int slash = file.lastIndexOf('/'); slash > 0; slash = file.lastIndexOf('/', slash - 1)) {
        folders.add(file.substring(0, slash));
      }
    }
    for (String folder : folders) {
      removeIfEmpty(fs, new Path(dir, folder));
    }
  }

  private static List<String> readJournal(FileSystem fs, Path journal) throws IOException {
    List<String> files;
    try (InputStream in = fs.open(journal)) {
      files = JSON.readValue(in, new TypeReference<List<String>>() {});
    } catch (IOException e) {
      throw new IOException("unreadable replacement journal " + journal + ": " + e.getMessage(), e);
    }
    for (String file : files) {
      SafePaths.requireInside(file, journal.toString());
    }
    return files;
  }

  private static boolean hasMarker(FileSystem fs, Path folder) throws IOException {
    return fs.exists(new Path(folder, DatasetLayout.RUN_MARKER));
  }

  private static void removeIfEmpty(FileSystem fs, Path folder) throws IOException {
    FileStatus s = status(fs, folder);
    if (s != null && s.isDirectory() && fs.listStatus(folder).length == 0) {
      fs.delete(folder, false);
    }
  }

  private static FileStatus status(FileSystem fs, Path path) throws IOException {
    try {
      return fs.getFileStatus(path);
    } catch (FileNotFoundException e) {
      return null;
    }
  }

  private static void write(FileSystem fs, Path path, byte[] bytes) throws IOException {
    try (OutputStream out = fs.create(path, true)) {
      out.write(bytes);
    } catch (IOException e) {
      throw IoErrors.writing(shown(path), e);
    } catch (FSError e) { // Hadoop's local filesystem throws a write's IOException as an Error
      throw IoErrors.writing(shown(path), IoErrors.unwrap(e));
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
