package dev.ramtrain.jobs.report;

import dev.ramtrain.format.IoErrors;
import java.awt.image.RenderedImage;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.ThreadLocalRandom;
import javax.imageio.ImageIO;

/**
 * Writes a report file whole or not at all: into a hidden file beside its target, renamed over it
 * when complete. The hidden file is created here (so the only file a failure removes is this call's
 * own) with the umask's permissions, not the owner-only ones of {@code Files.createTempFile}: a
 * report is meant to be read by others.
 */
public final class AtomicFile {
  /** What goes into the file. */
  public interface Body {
    void writeTo(OutputStream out) throws IOException;
  }

  private AtomicFile() {}

  public static void write(Path file, Body body) throws IOException {
    write(file, "", body);
  }

  /** {@code what}: how an error names the file's kind ("the PNG "), or "". */
  private static void write(Path file, String what, Body body) throws IOException {
    Path target = file.toAbsolutePath();
    Path tmp = null;
    try {
      Files.createDirectories(target.getParent());
      tmp = create(target);
      try (OutputStream out = Files.newOutputStream(tmp, StandardOpenOption.WRITE)) {
        body.writeTo(out);
      }
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      if (tmp != null) {
        Files.deleteIfExists(tmp);
      }
      throw new IOException("cannot write " + what + target + ": " + IoErrors.reason(e), e);
    }
  }

  /**
   * A PNG. The stream is opened here rather than by {@code ImageIO.write(File)}, which prints its
   * own stack trace and reports only "Can't create an ImageOutputStream!" when it cannot write.
   */
  public static void png(RenderedImage image, Path png) throws IOException {
    write(
        png,
        "the PNG ",
        out -> {
          if (!ImageIO.write(image, "png", out)) {
            throw new IOException("no PNG writer in this Java runtime");
          }
        });
  }

  private static Path create(Path target) throws IOException {
    while (true) {
      Path tmp =
          target.resolveSibling(
              "."
                  + target.getFileName()
                  + "."
                  + ThreadLocalRandom.current().nextInt(1 << 30)
                  + ".tmp");
      try {
        return Files.createFile(tmp);
      } catch (FileAlreadyExistsException taken) {
        // another writer's: try another name
      }
    }
  }
}
