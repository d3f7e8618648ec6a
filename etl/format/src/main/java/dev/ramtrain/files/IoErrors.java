package dev.ramtrain.files;

import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;

/**
 * The part of an I/O error a person needs, for one-line messages: the system's reason ("No space
 * left on device", "Read-only file system") without the path repeated, where Java's file errors
 * carry the path as their message and the reason apart, or only in their type.
 */
public final class IoErrors {
  private IoErrors() {}

  public static String reason(IOException e) {
    if (e instanceof FileSystemException f) {
      if (f.getReason() != null) {
        return f.getReason();
      }
      if (e instanceof NoSuchFileException) {
        return "no such file or directory";
      }
      if (e instanceof AccessDeniedException) {
        return "permission denied";
      }
      if (e instanceof FileAlreadyExistsException) {
        return "a file is in the way";
      }
      if (e instanceof NotDirectoryException) {
        return "not a directory";
      }
    }
    return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
  }

  /** The I/O error inside an {@link Error} that wraps one (Hadoop's {@code FSError}). */
  public static IOException unwrap(Error e) {
    return e.getCause() instanceof IOException io ? io : new IOException(e.getMessage(), e);
  }

  /** {@code e} restated as "REASON writing FILE", the cause kept. */
  public static IOException writing(Object file, IOException e) {
    return new IOException(reason(e) + " writing " + file, e);
  }
}
