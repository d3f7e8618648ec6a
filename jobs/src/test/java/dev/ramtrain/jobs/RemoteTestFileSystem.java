package dev.ramtrain.jobs;

import java.io.File;
import java.net.URI;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * A Hadoop filesystem of scheme {@code remote} for the tests: {@code remote:///a/b} is this
 * machine's {@code /a/b}, but only Hadoop's API reaches it (java.nio takes {@code remote:///a/b}
 * for a relative path), so it stands in for HDFS or S3A: a run directory there must be written and
 * read back through Hadoop. Registered through META-INF/services, as Hadoop finds its own.
 */
public final class RemoteTestFileSystem extends RawLocalFileSystem {
  private static final URI NAME = URI.create("remote:///");

  @Override
  public String getScheme() {
    return "remote";
  }

  @Override
  public URI getUri() {
    return NAME;
  }

  @Override
  public File pathToFile(Path path) {
    checkPath(path);
    Path absolute = path.isAbsolute() ? path : new Path(getWorkingDirectory(), path);
    return new File(absolute.toUri().getPath());
  }
}
