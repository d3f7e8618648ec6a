package dev.ramtrain.format;

import java.util.regex.Pattern;

/**
 * Which file names a manifest (or ramtrain's own journal) may hold. Manifests are untrusted input:
 * a name that could leave the dataset directory ({@code ../}, an absolute path, a URI, a backslash)
 * is refused before any file is opened. ramtrain only ever writes plain relative names.
 */
public final class SafePaths {
  private static final Pattern SEGMENT = Pattern.compile("[A-Za-z0-9_][A-Za-z0-9._-]{0,254}");
  private static final int MAX_LENGTH = 1024;

  private SafePaths() {}

  /** Fails unless {@code file} is a relative path of plain names, inside its directory. */
  public static void requireInside(String file, String where) throws ShardFormatException {
    if (file == null || file.isEmpty()) {
      throw new ShardFormatException(where, "a file name is missing");
    }
    if (file.length() > MAX_LENGTH) {
      throw new ShardFormatException(where, "file name of " + file.length() + " characters");
    }
    for (String segment : file.split("/", -1)) {
      if (!SEGMENT.matcher(segment).matches()) {
        throw new ShardFormatException(
            where,
            "file '"
                + printable(file)
                + "' is not a plain relative path inside the dataset directory (segment '"
                + printable(segment)
                + "')");
      }
    }
  }

  private static String printable(String s) {
    StringBuilder out = new StringBuilder();
    for (char c : s.toCharArray()) {
      out.append(c >= 0x20 && c < 0x7f ? String.valueOf(c) : String.format("\\u%04x", (int) c));
    }
    return out.length() > 120 ? out.substring(0, 120) + "..." : out.toString();
  }
}
