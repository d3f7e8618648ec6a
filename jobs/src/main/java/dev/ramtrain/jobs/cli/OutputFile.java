package dev.ramtrain.jobs.cli;

import dev.ramtrain.settings.ConfigException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.List;

/**
 * An output file a user names ({@code -o}): written only where it replaces nothing ramtrain cannot
 * prove it wrote. A file that is one of the command's own inputs is refused, and so is any other
 * existing file without ramtrain's mark for its kind (a PNG's text chunk, a CSV's header): a
 * mistyped {@code -o ds/manifest.json} or {@code -o photos/cat.jpg} ends with a usage error, not
 * with the file overwritten.
 */
final class OutputFile {
  /** Tells whether an existing file is one ramtrain wrote. */
  interface Mark {
    boolean on(Path file) throws IOException;
  }

  private OutputFile() {}

  static void requireReplaceable(Path out, String flag, List<Path> inputs, Mark mark)
      throws IOException {
    Path target = real(out);
    for (Path input : inputs) {
      if (target.equals(real(input))) {
        throw new ConfigException(
            flag + " " + out + " is one of its inputs: choose another file for the output");
      }
    }
    if (Files.isDirectory(out)) {
      throw new ConfigException(flag + " " + out + " is a directory: name a file");
    }
    if (Files.exists(out, LinkOption.NOFOLLOW_LINKS)
        && (!Files.isRegularFile(out, LinkOption.NOFOLLOW_LINKS) || !mark.on(out))) {
      throw new ConfigException(
          flag
              + " "
              + out
              + " exists and ramtrain did not write it: choose another file or move it away");
    }
  }

  /** The file {@code p} is, links followed where it exists. */
  private static Path real(Path p) throws IOException {
    Path absolute = p.toAbsolutePath().normalize();
    return Files.exists(absolute) ? absolute.toRealPath() : absolute;
  }
}
