package dev.ramtrain.etl.dataset;

import dev.ramtrain.files.OutputStreamChannel;
import java.io.IOException;
import java.io.Serializable;
import java.nio.channels.WritableByteChannel;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Where the tasks of one preprocessing run write their shards: the run's folder under {@code
 * _staging/}, which the driver created with its split folders. Tasks never create folders, so a
 * task still running after the driver aborted the run (and removed its folder) fails instead of
 * leaving files behind.
 */
public final class StagedShards implements Serializable {
  private final String runDir;
  private final HadoopConf conf;
  private final boolean directIo;

  StagedShards(Path runDir, HadoopConf conf, boolean directIo) {
    this.runDir = runDir.toString();
    this.conf = conf;
    this.directIo = directIo;
  }

  /** The Hadoop configuration the tasks write with (share it: a task ships it once). */
  public HadoopConf conf() {
    return conf;
  }

  /** Where shard {@code shard} of {@code split} is staged. */
  public Path path(String split, int shard) {
    return new Path(new Path(runDir), DatasetLayout.shardFile(split, shard));
  }

  /**
   * Creates (or, for a retried task, replaces) the staged shard; the caller closes the channel. A
   * local shard is written with direct I/O where allowed ({@link DirectFileChannel}), else through
   * a file channel (Arrow's buffers reach the page cache in one copy); elsewhere Hadoop's stream.
   */
  public WritableByteChannel create(String split, int shard) throws IOException {
    Path path = path(split, shard);
    FileSystem fs = DatasetFiles.fileSystem(path, conf.get());
    if (DatasetFiles.isLocal(fs)) {
      // No CREATE of folders: a run folder the driver removed fails the task, as on Hadoop.
      java.nio.file.Path file = DatasetFiles.local(fs, path);
      return directIo ? DirectFileChannel.create(file) : DirectFileChannel.createBuffered(file);
    }
    return new OutputStreamChannel(
        fs.createNonRecursive(
            path,
            true,
            1 << 16,
            fs.getDefaultReplication(path),
            fs.getDefaultBlockSize(path),
            null));
  }

  /** Removes a staged shard that will not be committed (all its inputs were rejected). */
  public void discard(String split, int shard) throws IOException {
    Path path = path(split, shard);
    DatasetFiles.fileSystem(path, conf.get()).delete(path, false);
  }
}
