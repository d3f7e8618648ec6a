package dev.ramtrain.etl.dataset;

import dev.ramtrain.files.IoErrors;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSError;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.UnsupportedFileSystemException;

/**
 * The few filesystem operations the dataset directory's writers share, on any Hadoop filesystem.
 */
public final class DatasetFiles {
  private DatasetFiles() {}

  /**
   * The filesystem of {@code path}; for local paths the raw one, so no {@code .crc} sidecar files
   * clutter the dataset (every shard has its CRC32C in the manifest).
   */
  public static FileSystem fileSystem(Path path, Configuration conf) throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    return fs instanceof LocalFileSystem local ? local.getRawFileSystem() : fs;
  }

  /** A path as a person reads it: local ones without their {@code file:} scheme. */
  public static String shown(Path path) {
    return "file".equals(path.toUri().getScheme()) ? path.toUri().getPath() : path.toString();
  }

  static boolean isLocal(FileSystem fs) {
    return "file".equals(fs.getUri().getScheme());
  }

  /** A local filesystem's path as a java.nio path, for what Hadoop's API cannot do atomically. */
  static java.nio.file.Path local(FileSystem fs, Path path) {
    return Paths.get(fs.makeQualified(path).toUri());
  }

  /** The status of {@code path}, or null if there is nothing there. */
  static FileStatus status(FileSystem fs, Path path) throws IOException {
    try {
      return fs.getFileStatus(path);
    } catch (FileNotFoundException e) {
      return null;
    }
  }

  static boolean hasMarker(FileSystem fs, Path folder) throws IOException {
    return fs.exists(new Path(folder, DatasetLayout.RUN_MARKER));
  }

  static void removeIfEmpty(FileSystem fs, Path folder) throws IOException {
    FileStatus s = status(fs, folder);
    if (s != null && s.isDirectory() && fs.listStatus(folder).length == 0) {
      fs.delete(folder, false);
    }
  }

  /** Writes a small file whole, naming it when the write fails. */
  static void write(FileSystem fs, Path path, byte[] bytes) throws IOException {
    try (OutputStream out = fs.create(path, true)) {
      out.write(bytes);
    } catch (IOException e) {
      throw IoErrors.writing(shown(path), e);
    } catch (FSError e) { // Hadoop's local filesystem throws a write's IOException as an Error
      throw IoErrors.writing(shown(path), IoErrors.unwrap(e));
    }
  }

  /**
   * Replaces {@code target} with {@code bytes} so that a reader, or a process killed at any point,
   * finds the old content or the new one whole: written to {@code tmp} first, then renamed over it.
   */
  static void replace(FileSystem fs, Path tmp, Path target, byte[] bytes) throws IOException {
    write(fs, tmp, bytes);
    if (isLocal(fs)) {
      Files.move(
          local(fs, tmp),
          local(fs, target),
          StandardCopyOption.ATOMIC_MOVE,
          StandardCopyOption.REPLACE_EXISTING);
      return;
    }
    try {
      FileContext.getFileContext(fs.getUri(), fs.getConf())
          .rename(tmp, target, Options.Rename.OVERWRITE);
    } catch (UnsupportedFileSystemException e) {
      // No FileContext for this scheme: replace in two steps (readers may briefly find none).
      fs.delete(target, false);
      if (!fs.rename(tmp, target)) {
        throw new IOException("cannot replace " + shown(target) + " with " + shown(tmp));
      }
    }
  }
}
