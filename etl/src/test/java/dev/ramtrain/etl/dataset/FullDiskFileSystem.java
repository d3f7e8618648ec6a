package dev.ramtrain.etl.dataset;

import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Local files under the scheme {@code fulldisk:}, where a file stops growing at {@value #LIMIT}
 * bytes with the error a full disk gives: a disk that fills up in the middle of a shard, without
 * the privileges a small tmpfs needs.
 */
public final class FullDiskFileSystem extends RawLocalFileSystem {
  public static final String LIMIT = "fs.fulldisk.max-file-bytes";

  @Override
  public URI getUri() {
    return URI.create("fulldisk:///");
  }

  @Override
  public String getScheme() {
    return "fulldisk";
  }

  @Override
  protected OutputStream createOutputStreamWithMode(Path f, boolean append, FsPermission permission)
      throws IOException {
    return new Capped(
        super.createOutputStreamWithMode(f, append, permission),
        getConf().getLong(LIMIT, Long.MAX_VALUE));
  }

  @Override
  protected OutputStream createOutputStream(Path f, boolean append) throws IOException {
    return new Capped(
        super.createOutputStream(f, append), getConf().getLong(LIMIT, Long.MAX_VALUE));
  }

  private static final class Capped extends FilterOutputStream {
    private final long limit;
    private long written;

    Capped(OutputStream out, long limit) {
      super(out);
      this.limit = limit;
    }

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      if (written + len > limit) {
        throw new IOException("No space left on device");
      }
      out.write(b, off, len);
      written += len;
    }
  }
}
