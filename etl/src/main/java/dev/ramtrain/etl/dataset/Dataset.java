package dev.ramtrain.etl.dataset;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ManifestCodec;
import dev.ramtrain.format.ShardFormatException;
import dev.ramtrain.format.ShardReader;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntPredicate;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/** A committed dataset directory: its manifest, and its shards opened on demand. */
public final class Dataset {
  private final String location;
  private final Manifest manifest;
  private final FileSystem fs;

  private Dataset(String location, Manifest manifest, FileSystem fs) {
    this.location = location;
    this.manifest = manifest;
    this.fs = fs;
  }

  /** Opens a dataset on any Hadoop filesystem URI or local path. */
  public static Dataset open(String location, Configuration hadoopConf) throws IOException {
    Path dir = new Path(location);
    FileSystem fs = DatasetFiles.fileSystem(dir, hadoopConf);
    Path manifestPath = new Path(dir, DatasetLayout.MANIFEST);
    byte[] json;
    try (InputStream in = fs.open(manifestPath)) {
      json = in.readAllBytes();
    } catch (FileNotFoundException e) {
      String why =
          fs.exists(new Path(dir, DatasetLayout.STAGING))
              ? " (a preprocessing run started but never committed)"
              : fs.exists(dir) ? "" : " (the directory does not exist)";
      throw new NoDatasetException(
          manifestPath.toString(), "no dataset here: manifest.json is missing" + why, e);
    } catch (IOException e) {
      throw new ShardFormatException(manifestPath.toString(), "cannot read manifest: " + e, e);
    }
    return new Dataset(location, ManifestCodec.fromJson(json, manifestPath.toString()), fs);
  }

  /**
   * The dataset at {@code location} as {@code manifest} describes it: the version a driver opened
   * (and holds, {@link VersionLease}), for the tasks that read it, whatever the manifest file says
   * by the time they start.
   */
  public static Dataset of(String location, Manifest manifest, Configuration hadoopConf)
      throws IOException {
    return new Dataset(location, manifest, DatasetFiles.fileSystem(new Path(location), hadoopConf));
  }

  public Manifest manifest() {
    return manifest;
  }

  public String location() {
    return location;
  }

  /**
   * Whether the shards are on a local disk (memory-mapped when opened) rather than a Hadoop
   * filesystem such as HDFS or S3A (read into memory when opened).
   */
  public boolean local() {
    return "file".equals(fs.getUri().getScheme());
  }

  /**
   * Opens (and checksums) every shard of {@code split}, in manifest order; on failure closes the
   * ones already opened. The caller owns the readers.
   */
  public List<ShardReader> openSplit(String split) throws IOException {
    return openShards(split, shard -> true);
  }

  /**
   * Opens (and checksums) the shards of {@code split} whose index in the manifest {@code which}
   * accepts (a data-parallel rank's own), in manifest order; on failure closes the ones already
   * opened. The caller owns the readers.
   */
  public List<ShardReader> openShards(String split, IntPredicate which) throws IOException {
    List<ShardReader> readers = new ArrayList<>();
    try {
      List<Manifest.Shard> shards = manifest.split(split).shards();
      for (int i = 0; i < shards.size(); i++) {
        if (which.test(i)) {
          readers.add(openShard(shards.get(i), true));
        }
      }
    } catch (IOException | RuntimeException e) {
      readers.forEach(ShardReader::close);
      throw e;
    }
    return readers;
  }

  /**
   * Opens one shard, checking its CRC32C against the manifest when {@code verify}. Local files are
   * memory-mapped (pixels are never copied onto the Java heap); other filesystems are read once
   * into direct memory.
   */
  public ShardReader openShard(Manifest.Shard shard, boolean verify) throws IOException {
    Path path = checkedPath(shard);
    Long crc = verify ? shard.crc32cValue() : null;
    ShardReader reader;
    if (local()) {
      reader = ShardReader.open(Paths.get(fs.makeQualified(path).toUri()), crc);
    } else {
      ByteBuffer buffer = ByteBuffer.allocateDirect((int) shard.bytes());
      readInto(path, buffer);
      reader = ShardReader.open(path.toString(), buffer, crc);
    }
    return checked(reader, path, shard);
  }

  /**
   * Reads one shard into {@code into} (direct memory the caller owns, at least the shard's bytes),
   * checks it as {@link #openShard} does, its CRC32C always, and returns a reader over that memory:
   * a loader keeping a window of shards streams them this way from any filesystem.
   */
  public ShardReader readShard(Manifest.Shard shard, ByteBuffer into) throws IOException {
    Path path = checkedPath(shard);
    if (into.capacity() < shard.bytes()) {
      throw new IllegalArgumentException(
          "a " + into.capacity() + "-byte buffer for the " + shard.bytes() + " bytes of " + path);
    }
    ByteBuffer target = into.duplicate().clear().limit((int) shard.bytes());
    readInto(path, target);
    return checked(ShardReader.open(path.toString(), target, shard.crc32cValue()), path, shard);
  }

  /** The shard's path, inside the dataset and of the size the manifest says. */
  private Path checkedPath(Manifest.Shard shard) throws IOException {
    Path path = new Path(new Path(location), shard.file());
    requireInsideDataset(path);
    long size;
    try {
      size = fs.getFileStatus(path).getLen();
    } catch (FileNotFoundException e) {
      throw new ShardFormatException(
          path.toString(), "shard file listed in the manifest is missing", e);
    }
    if (size != shard.bytes()) {
      throw new ShardFormatException(
          path.toString(),
          (size < shard.bytes() ? "truncated shard: " : "shard changed size: ")
              + size
              + " bytes, the manifest says "
              + shard.bytes());
    }
    if (size > Integer.MAX_VALUE) {
      throw new ShardFormatException(path.toString(), "shard is larger than 2 GiB");
    }
    return path;
  }

  /** {@code reader}, if its schema and rows are the manifest's; closed and refused otherwise. */
  private ShardReader checked(ShardReader reader, Path path, Manifest.Shard shard)
      throws ShardFormatException {
    if (!reader.schema().equals(manifest.shardSchema())) {
      String found = reader.schema().toString();
      reader.close();
      throw new ShardFormatException(
          path.toString(),
          "shard schema " + found + " differs from the manifest's " + manifest.shardSchema());
    }
    long rows = reader.rowCount();
    if (rows != shard.rows()) {
      reader.close();
      throw new ShardFormatException(
          path.toString(), "shard holds " + rows + " rows, the manifest says " + shard.rows());
    }
    return reader;
  }

  /**
   * The manifest's names are plain relative paths (checked when it was read); here a symbolic link
   * that leads out of the dataset directory is refused too, before the file is opened.
   */
  private void requireInsideDataset(Path path) throws IOException {
    if (!local()) {
      return; // Hadoop filesystems other than local disks resolve no links for reads here
    }
    java.nio.file.Path file = Paths.get(fs.makeQualified(path).toUri());
    java.nio.file.Path root = Paths.get(fs.makeQualified(new Path(location)).toUri());
    try {
      java.nio.file.Path real = file.toRealPath();
      if (!real.startsWith(root.toRealPath())) {
        throw new ShardFormatException(
            path.toString(), "shard leads out of the dataset directory (to " + real + ")");
      }
    } catch (java.nio.file.NoSuchFileException e) {
      // missing: reported as such below
    }
  }

  /** Fills {@code target} (its remaining bytes: the file's size) from the file at {@code path}. */
  private void readInto(Path path, ByteBuffer target) throws IOException {
    int expected = target.remaining();
    try (FSDataInputStream in = fs.open(path)) {
      byte[] chunk = new byte[1 << 20];
      int n;
      while (target.hasRemaining()
          && (n = in.read(chunk, 0, Math.min(chunk.length, target.remaining()))) > 0) {
        target.put(chunk, 0, n);
      }
    }
    if (target.hasRemaining()) {
      throw new ShardFormatException(
          path.toString(),
          "truncated shard: read "
              + (expected - target.remaining())
              + " of "
              + expected
              + " bytes");
    }
    target.flip();
  }
}
