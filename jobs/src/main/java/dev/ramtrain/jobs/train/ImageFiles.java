package dev.ramtrain.jobs.train;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The image files a user names: files as given (whatever they turn out to be: a missing or special
 * file becomes its error row, not the end of the run), and the image files found under directories.
 */
public final class ImageFiles {
  private static final Set<String> IMAGE_EXTENSIONS =
      Set.of("jpg", "jpeg", "png", "bmp", "gif", "webp", "tif", "tiff");

  private ImageFiles() {}

  /** Files named directly, and image files found under named directories, each sorted. */
  public static List<Path> under(List<Path> inputs) throws IOException {
    List<Path> files = new ArrayList<>();
    for (Path input : inputs) {
      if (Files.isDirectory(input)) {
        try (Stream<Path> walk = Files.walk(input)) {
          walk.filter(Files::isRegularFile)
              .filter(ImageFiles::looksLikeImage)
              .sorted()
              .forEach(files::add);
        }
      } else {
        files.add(input);
      }
    }
    if (files.isEmpty()) {
      throw new IOException("no image files under " + inputs);
    }
    return files;
  }

  private static boolean looksLikeImage(Path p) {
    String name = p.getFileName().toString();
    int dot = name.lastIndexOf('.');
    return dot > 0 && IMAGE_EXTENSIONS.contains(name.substring(dot + 1).toLowerCase(Locale.ROOT));
  }
}
