package dev.ramtrain.jobs.report;

import dev.ramtrain.format.IoErrors;
import java.awt.image.RenderedImage;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import javax.imageio.ImageIO;

/**
 * Writes a PNG whole or not at all: into a hidden file beside its target, renamed over it when
 * complete. The file is opened here rather than by {@code ImageIO.write(File)}, which prints its
 * own stack trace and reports only "Can't create an ImageOutputStream!" when it cannot write.
 */
public final class Png {
  private Png() {}

  public static void write(RenderedImage image, Path png) throws IOException {
    Path target = png.toAbsolutePath();
    Path tmp = null; // created here, so the only file a failure removes is this call's own
    try {
      Files.createDirectories(target.getParent());
      tmp = Files.createTempFile(target.getParent(), "." + target.getFileName(), ".tmp");
      try (OutputStream out = Files.newOutputStream(tmp)) {
        if (!ImageIO.write(image, "png", out)) {
          throw new IOException("no PNG writer in this Java runtime");
        }
      }
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      if (tmp != null) {
        Files.deleteIfExists(tmp);
      }
      throw new IOException("cannot write the PNG " + target + ": " + IoErrors.reason(e), e);
    }
  }
}
