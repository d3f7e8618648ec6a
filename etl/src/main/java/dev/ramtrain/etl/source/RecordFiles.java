package dev.ramtrain.etl.source;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.GZIPInputStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/** Opening and listing of fixed-record dataset files (idx, CIFAR) on any Hadoop filesystem. */
final class RecordFiles {
  private RecordFiles() {}

  /** Opens {@code file}, gunzipping {@code .gz}, positioned after {@code skip} bytes. */
  static DataInputStream open(String file, long skip, Configuration conf) throws IOException {
    Path path = new Path(file);
    InputStream in = path.getFileSystem(conf).open(path);
    if (file.endsWith(".gz")) {
      in = new GZIPInputStream(in, 1 << 16);
    }
    DataInputStream data = new DataInputStream(new BufferedInputStream(in, 1 << 16));
    try {
      data.skipNBytes(skip);
    } catch (EOFException e) {
      data.close();
      throw new IOException(file + ": truncated (ends before byte " + skip + ")", e);
    }
    return data;
  }

  static List<String> list(String dir, Configuration conf) throws IOException {
    Path path = new Path(dir);
    FileSystem fs = path.getFileSystem(conf);
    if (!fs.exists(path)) {
      throw new IOException("source directory " + dir + " does not exist");
    }
    List<String> files = new ArrayList<>();
    for (FileStatus status : fs.listStatus(path)) {
      if (status.isFile()) {
        files.add(fs.makeQualified(status.getPath()).toString());
      }
    }
    files.sort(null);
    return files;
  }

  static long length(String file, Configuration conf) throws IOException {
    Path path = new Path(file);
    return path.getFileSystem(conf).getFileStatus(path).getLen();
  }

  static String name(String file) {
    return new Path(file).getName();
  }
}
