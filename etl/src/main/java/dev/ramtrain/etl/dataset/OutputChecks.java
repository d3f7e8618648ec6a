package dev.ramtrain.etl.dataset;

import dev.ramtrain.files.IoErrors;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Whether an output directory may be written without risking files that are not ramtrain's: it is
 * new, empty, or a ramtrain dataset, and neither inside the input nor around it. A refusal is a
 * usage error ({@link DatasetCommitter.UnsafeOutputException}), whatever the flags.
 */
final class OutputChecks {
  private OutputChecks() {}

  /** Creates {@code dir} unless it exists; returns whether it did. A file there is refused. */
  static boolean createDirectory(FileSystem fs, Path dir) throws IOException {
    FileStatus status = DatasetFiles.status(fs, dir);
    if (status != null) {
      if (!status.isDirectory()) {
        throw new DatasetCommitter.UnsafeOutputException(
            DatasetFiles.shown(dir) + " exists and is not a directory");
      }
      return false;
    }
    try {
      if (DatasetFiles.isLocal(fs)) {
        Files.createDirectories(DatasetFiles.local(fs, dir));
      } else if (!fs.mkdirs(dir)) {
        throw new IOException("the filesystem refused");
      }
    } catch (IOException e) {
      throw new IOException(
          "cannot create the output directory "
              + DatasetFiles.shown(dir)
              + ": "
              + IoErrors.reason(e),
          e);
    }
    return true;
  }

  /** Refuses a directory holding anything but a dead ramtrain writer's leftovers. */
  static void requireOnlyRamtrainEntries(FileSystem fs, Path dir) throws IOException {
    List<String> foreign = new ArrayList<>();
    for (FileStatus s : fs.listStatus(dir)) {
      String name = s.getPath().getName();
      boolean ours =
          name.equals(DirectoryLock.FILE)
              || name.equals(DatasetLayout.STAGING)
              || name.equals(VersionLease.FOLDER)
              || (s.isDirectory()
                  && DatasetLayout.versionNumber(name) >= 0
                  && DatasetFiles.hasMarker(fs, s.getPath()));
      if (!ours) {
        foreign.add(name);
      }
    }
    if (!foreign.isEmpty()) {
      foreign.sort(null);
      throw new DatasetCommitter.UnsafeOutputException(
          DatasetFiles.shown(dir)
              + " is not empty and holds no ramtrain dataset (no manifest.json; it has "
              + String.join(", ", foreign.subList(0, Math.min(5, foreign.size())))
              + (foreign.size() > 5 ? ", ..." : "")
              + "): ramtrain writes a dataset only into a new or empty directory or over one of"
              + " its own, and deletes nothing it did not write; choose another output");
    }
  }

  /** Refuses an output inside {@code input} or around it (a table name overlaps nothing). */
  static void requireSeparate(String input, Path output, FileSystem fs, Configuration conf)
      throws IOException {
    String in;
    try {
      Path path = new Path(input);
      FileSystem inputFs = DatasetFiles.fileSystem(path, conf);
      if (!inputFs.exists(path)) {
        return; // the source reports a missing input itself
      }
      in = canonical(inputFs, inputFs.makeQualified(path));
    } catch (IOException | IllegalArgumentException e) {
      return; // not a filesystem path (a table name): nothing to overlap
    }
    String out = canonical(fs, output);
    if (out.equals(in) || out.startsWith(in + "/")) {
      throw new DatasetCommitter.UnsafeOutputException(
          "ramtrain.etl.output "
              + DatasetFiles.shown(output)
              + " is inside the input "
              + input
              + ": the dataset would be written among the files it is read from; choose an output"
              + " outside the input");
    }
    if (in.startsWith(out + "/")) {
      throw new DatasetCommitter.UnsafeOutputException(
          "the input "
              + input
              + " is inside ramtrain.etl.output "
              + DatasetFiles.shown(output)
              + ": writing the dataset there could replace the input; choose an output outside"
              + " the input");
    }
  }

  /** A path's URI with symbolic links resolved where the filesystem is local. */
  private static String canonical(FileSystem fs, Path qualified) throws IOException {
    if (!DatasetFiles.isLocal(fs)) {
      return trimSlash(qualified.toUri().toString());
    }
    java.nio.file.Path p = DatasetFiles.local(fs, qualified).normalize();
    java.nio.file.Path existing = p;
    while (existing != null && !Files.exists(existing)) {
      existing = existing.getParent();
    }
    if (existing == null) {
      return trimSlash(p.toString());
    }
    return trimSlash(existing.toRealPath().resolve(existing.relativize(p)).toString());
  }

  private static String trimSlash(String s) {
    return s.length() > 1 && s.endsWith("/") ? s.substring(0, s.length() - 1) : s;
  }
}
