package dev.ramtrain.jobs.report;

import dev.ramtrain.files.IoErrors;
import java.awt.image.RenderedImage;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Iterator;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.imageio.IIOImage;
import javax.imageio.ImageIO;
import javax.imageio.ImageTypeSpecifier;
import javax.imageio.ImageWriteParam;
import javax.imageio.ImageWriter;
import javax.imageio.metadata.IIOMetadata;
import javax.imageio.metadata.IIOMetadataNode;
import javax.imageio.stream.ImageOutputStream;

/**
 * Writes a report file whole or not at all: into a hidden file beside its target ({@code
 * .NAME.N.tmp}), renamed over it when complete. The hidden file is created here (so the only file a
 * failure removes is this call's own) with the umask's permissions, not the owner-only ones of
 * {@code Files.createTempFile}: a report is meant to be read by others. PNGs carry a {@code
 * Software: ramtrain} text chunk, by which ramtrain knows a picture of its own from a user's.
 */
public final class AtomicFile {
  private static final Pattern STAGING = Pattern.compile("\\.(.+)\\.\\d+\\.tmp");
  private static final byte[] PNG_MARK =
      "tEXtSoftware\0ramtrain".getBytes(StandardCharsets.ISO_8859_1);

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
    } catch (RuntimeException | Error e) { // what the body failed with, as it was
      if (tmp != null) {
        Files.deleteIfExists(tmp);
      }
      throw e;
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
          Iterator<ImageWriter> writers = ImageIO.getImageWritersByFormatName("png");
          if (!writers.hasNext()) {
            throw new IOException("no PNG writer in this Java runtime");
          }
          ImageWriter writer = writers.next();
          try (ImageOutputStream stream = ImageIO.createImageOutputStream(out)) {
            ImageWriteParam param = writer.getDefaultWriteParam();
            IIOMetadata metadata =
                writer.getDefaultImageMetadata(
                    ImageTypeSpecifier.createFromRenderedImage(image), param);
            IIOMetadataNode entry = new IIOMetadataNode("tEXtEntry");
            entry.setAttribute("keyword", "Software");
            entry.setAttribute("value", "ramtrain");
            IIOMetadataNode text = new IIOMetadataNode("tEXt");
            text.appendChild(entry);
            IIOMetadataNode root = new IIOMetadataNode("javax_imageio_png_1.0");
            root.appendChild(text);
            metadata.mergeTree("javax_imageio_png_1.0", root);
            writer.setOutput(stream);
            writer.write(null, new IIOImage(image, null, metadata), param);
          } finally {
            writer.dispose();
          }
        });
  }

  /** Whether {@code file} is a PNG ramtrain wrote (its text chunk says so, before the pixels). */
  public static boolean isRamtrainPng(Path file) throws IOException {
    if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) {
      return false;
    }
    byte[] head;
    try (InputStream in = Files.newInputStream(file)) {
      head = in.readNBytes(4096);
    }
    for (int i = 0; i + PNG_MARK.length <= head.length; i++) {
      if (Arrays.equals(head, i, i + PNG_MARK.length, PNG_MARK, 0, PNG_MARK.length)) {
        return true;
      }
    }
    return false;
  }

  /** The file a staging file of this name ({@code .NAME.N.tmp}) becomes, if it is one. */
  public static Optional<String> stagedTarget(String name) {
    Matcher m = STAGING.matcher(name);
    return m.matches() ? Optional.of(m.group(1)) : Optional.empty();
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
