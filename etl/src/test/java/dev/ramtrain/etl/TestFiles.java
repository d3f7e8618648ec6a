package dev.ramtrain.etl;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/** Folders in tests: copies, and what "nothing was touched" compares. */
public final class TestFiles {
  private TestFiles() {}

  /** Every file and folder under {@code dir}, a file with its bytes. */
  public static Map<String, String> contents(Path dir) throws IOException {
    Map<String, String> files = new TreeMap<>();
    try (Stream<Path> walk = Files.walk(dir)) {
      for (Path p : walk.toList()) {
        files.put(
            dir.relativize(p).toString(),
            Files.isDirectory(p) ? "folder" : Arrays.toString(Files.readAllBytes(p)));
      }
    }
    return files;
  }

  public static void copyTree(Path from, Path to) throws IOException {
    try (Stream<Path> walk = Files.walk(from)) {
      for (Path p : walk.toList()) {
        Path target = to.resolve(from.relativize(p).toString());
        if (Files.isDirectory(p)) {
          Files.createDirectories(target);
        } else {
          Files.copy(p, target);
        }
      }
    }
  }
}
