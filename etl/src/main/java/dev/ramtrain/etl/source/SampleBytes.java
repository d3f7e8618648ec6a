package dev.ramtrain.etl.source;

import dev.ramtrain.etl.dataset.DatasetFiles;
import dev.ramtrain.files.IoErrors;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * Reads an unread sample's file where it is decoded, never more than {@code maxBytes + 1} of it, so
 * a file over the limit is rejected without being read whole. A file gone or unreadable since the
 * listing is rejected and listed; any other I/O error fails the task (Spark retries it), naming the
 * file. Local files are read with one positional read instead of through Hadoop's local filesystem,
 * which stats the file and wraps it in three streams first.
 */
public final class SampleBytes {
  private SampleBytes() {}

  public static RawSample read(RawSample sample, Configuration conf, long maxBytes)
      throws RejectedImageException, IOException {
    if (sample.isRead()) {
      return sample;
    }
    byte[] bytes;
    try {
      URI uri = new Path(sample.location()).toUri(); // Hadoop paths are not URI-escaped
      bytes = "file".equals(uri.getScheme()) ? readLocal(uri, maxBytes) : read(uri, conf, maxBytes);
    } catch (FileNotFoundException | NoSuchFileException | AccessDeniedException e) {
      throw new RejectedImageException(RejectReason.UNREADABLE, IoErrors.reason(e));
    } catch (IOException e) {
      throw new IOException(IoErrors.reason(e) + " reading " + sample.location(), e);
    }
    if (bytes.length > maxBytes) {
      throw tooLarge("more than", maxBytes);
    }
    return sample.withContent(bytes);
  }

  private static byte[] readLocal(URI uri, long maxBytes)
      throws IOException, RejectedImageException {
    java.nio.file.Path path = Paths.get(uri);
    requireRegularFile(path);
    try (FileChannel file = FileChannel.open(path, StandardOpenOption.READ)) {
      long size = file.size();
      if (size > maxBytes) {
        throw tooLarge(size, maxBytes);
      }
      ByteBuffer buffer = ByteBuffer.allocate((int) size);
      while (buffer.hasRemaining() && file.read(buffer, buffer.position()) >= 0) {
        // A file that shrank since it was sized ends the loop at end of file.
      }
      if (buffer.hasRemaining()) {
        byte[] shorter = new byte[buffer.position()];
        System.arraycopy(buffer.array(), 0, shorter, 0, shorter.length);
        return shorter;
      }
      return buffer.array();
    }
  }

  /**
   * A local file's bytes, at most {@code maxBytes} of them: what is not a regular file, a file over
   * the limit (never read) and one that is missing or unreadable are rejected.
   */
  public static byte[] readFile(java.nio.file.Path path, long maxBytes)
      throws RejectedImageException, IOException {
    try {
      return readLocal(path.toUri(), maxBytes);
    } catch (FileNotFoundException | NoSuchFileException | AccessDeniedException e) {
      throw new RejectedImageException(RejectReason.UNREADABLE, IoErrors.reason(e));
    }
  }

  /**
   * Refuses what is not a regular file (through links): a named pipe would block the read forever,
   * a device never end; only files are images.
   */
  public static void requireRegularFile(java.nio.file.Path path) throws RejectedImageException {
    if (Files.exists(path) && !Files.isRegularFile(path)) {
      throw new RejectedImageException(
          RejectReason.UNREADABLE,
          "not a regular file (" + kind(path) + "): only files are read as images");
    }
  }

  private static String kind(java.nio.file.Path path) {
    try {
      BasicFileAttributes a = Files.readAttributes(path, BasicFileAttributes.class);
      return a.isDirectory() ? "a directory" : "a named pipe, socket or device";
    } catch (IOException e) {
      return IoErrors.reason(e);
    }
  }

  /** The rejection of a {@code size}-byte input over the limit, read or not. */
  public static RejectedImageException tooLarge(long size, long maxBytes) {
    return tooLarge(size + " bytes exceeds", maxBytes);
  }

  private static RejectedImageException tooLarge(String size, long maxBytes) {
    return new RejectedImageException(
        RejectReason.TOO_LARGE, size + " ramtrain.etl.max-file-bytes=" + maxBytes);
  }

  private static byte[] read(URI uri, Configuration conf, long maxBytes) throws IOException {
    Path path = new Path(uri);
    try (InputStream in = DatasetFiles.fileSystem(path, conf).open(path)) {
      return in.readNBytes((int) Math.min(maxBytes + 1, Integer.MAX_VALUE - 8));
    }
  }
}
