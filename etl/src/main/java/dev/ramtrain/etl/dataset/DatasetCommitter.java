package dev.ramtrain.etl.dataset;

import dev.ramtrain.etl.shard.Manifest;
import dev.ramtrain.etl.shard.ManifestCodec;
import java.io.IOException;
import java.io.OutputStream;
import java.io.Serializable;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Commits a dataset directory atomically on any Hadoop filesystem: tasks write shards under {@code
 * _staging/<run>/}, the driver moves them into place and publishes {@code manifest.json} last by a
 * rename. Until that rename no reader sees a dataset; a later run removes whatever a killed run
 * left. One writer per output directory at a time.
 */
public final class DatasetCommitter implements Serializable {
  private static final Logger LOG = LoggerFactory.getLogger(DatasetCommitter.class);

  private final String output;
  private final String runId;
  private final HadoopConf conf;

  private DatasetCommitter(String output, String runId, HadoopConf conf) {
    this.output = output;
    this.runId = runId;
    this.conf = conf;
  }

  /**
   * Prepares {@code output} for a new run: refuses to replace a committed dataset unless {@code
   * overwrite}, and removes what an earlier, failed run left behind.
   */
  public static DatasetCommitter begin(String output, boolean overwrite, Configuration hadoopConf)
      throws IOException {
    Path dir = new Path(output);
    FileSystem fs = fileSystem(dir, hadoopConf);
    boolean committed = fs.exists(new Path(dir, DatasetLayout.MANIFEST));
    if (committed && !overwrite) {
      throw new DatasetExistsException(
          output
              + " already holds a dataset (manifest.json); choose another output or set"
              + " ramtrain.etl.overwrite=true (--overwrite)");
    }
    if (fs.exists(dir) && !fs.getFileStatus(dir).isDirectory()) {
      throw new IOException(output + " exists and is not a directory");
    }
    Path staging = new Path(dir, DatasetLayout.STAGING);
    if (fs.exists(staging)) {
      LOG.info("removing {} left by an earlier run that did not commit", staging);
      fs.delete(staging, true);
    }
    if (!committed) {
      removeUncommittedSplits(fs, dir);
    }
    String runId = UUID.randomUUID().toString();
    return new DatasetCommitter(output, runId, new HadoopConf(hadoopConf));
  }

  public String output() {
    return output;
  }

  public HadoopConf hadoopConf() {
    return conf;
  }

  /** Where a task writes shard {@code shard} of {@code split} (a file the task creates). */
  public Path stagingShard(String split, int shard) {
    return new Path(runDir(), DatasetLayout.shardFile(split, shard));
  }

  /** Opens a staging shard for writing; the caller closes the stream. */
  public OutputStream createStagingShard(String split, int shard) throws IOException {
    Path path = stagingShard(split, shard);
    return fileSystem(path, conf.get()).create(path, true);
  }

  /**
   * Moves the staged shards into place, writes the rejects list, and publishes the manifest. Every
   * shard named in the manifest must have been staged.
   */
  public void commit(Manifest manifest, byte[] rejectsJsonLines) throws IOException {
    Path dir = new Path(output);
    FileSystem fs = fileSystem(dir, conf.get());
    for (var split : manifest.splits().values()) {
      for (Manifest.Shard shard : split.shards()) {
        Path staged = new Path(runDir(), shard.file());
        if (!fs.exists(staged)) {
          throw new IOException(
              "cannot commit " + output + ": staged shard " + staged + " is missing");
        }
      }
    }
    // From here the old dataset (if any) is no longer readable: its manifest goes first.
    fs.delete(new Path(dir, DatasetLayout.MANIFEST), false);
    removeUncommittedSplits(fs, dir);
    for (String split : manifest.splits().keySet()) {
      Path staged = new Path(runDir(), split);
      if (fs.exists(staged) && !fs.rename(staged, new Path(dir, split))) {
        throw new IOException("cannot move " + staged + " into " + dir);
      }
    }
    writeAtomically(fs, new Path(dir, DatasetLayout.REJECTS), rejectsJsonLines);
    writeAtomically(fs, new Path(dir, DatasetLayout.MANIFEST), ManifestCodec.toJson(manifest));
    fs.delete(new Path(dir, DatasetLayout.STAGING), true);
  }

  /** Removes this run's staged files; the output is left as it was before the run. */
  public void abort() {
    try {
      Path staging = new Path(output, DatasetLayout.STAGING);
      fileSystem(staging, conf.get()).delete(staging, true);
    } catch (IOException e) {
      LOG.warn("could not remove staging files of run {}: {}", runId, e.toString());
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

  private Path runDir() {
    return new Path(new Path(output, DatasetLayout.STAGING), runId);
  }

  private static void removeUncommittedSplits(FileSystem fs, Path dir) throws IOException {
    for (String split : new String[] {Manifest.TRAIN, Manifest.VAL}) {
      fs.delete(new Path(dir, split), true);
    }
    fs.delete(new Path(dir, DatasetLayout.REJECTS), false);
  }

  private static void writeAtomically(FileSystem fs, Path target, byte[] bytes) throws IOException {
    Path tmp = new Path(target.getParent(), "_" + target.getName() + ".tmp");
    try (OutputStream out = fs.create(tmp, true)) {
      out.write(bytes);
    }
    fs.delete(target, false);
    if (!fs.rename(tmp, target)) {
      throw new IOException("cannot publish " + target);
    }
  }

  /** The output already holds a committed dataset and overwriting was not asked for. */
  public static final class DatasetExistsException extends IOException {
    public DatasetExistsException(String message) {
      super(message);
    }
  }
}
