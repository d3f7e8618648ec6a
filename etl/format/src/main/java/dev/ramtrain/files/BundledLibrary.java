package dev.ramtrain.files;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * A JNI library of ramtrain's own, carried in a jar beside the class that uses it (the build puts
 * it there where gcc is at hand): copied to a temporary file, loaded, and the file deleted.
 */
public final class BundledLibrary {
  private BundledLibrary() {}

  /**
   * Loads the library at {@code resource} (relative to {@code owner}'s package); returns null, or
   * why it is not loaded (not built for this platform, or it does not link here).
   */
  public static String load(Class<?> owner, String resource) {
    try (InputStream in = owner.getResourceAsStream(resource)) {
      if (in == null) {
        return "not built for this platform";
      }
      String name = Path.of(resource).getFileName().toString();
      Path file = Files.createTempFile(name.replace(".so", ""), ".so");
      try {
        Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
        System.load(file.toString());
      } finally {
        Files.delete(file); // mapped once loaded: the file itself is not needed
      }
      return null;
    } catch (IOException | UnsatisfiedLinkError e) {
      return String.valueOf(e.getMessage());
    }
  }
}
