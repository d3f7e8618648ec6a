package dev.ramtrain.console;

/**
 * Text from outside (file and class names, a dataset's keys, what an exception says of them) made
 * safe to print: control characters, which a terminal would obey (an escape sequence can move the
 * cursor, retitle the window or hide the line), become visible {@code \xNN} escapes, and so does a
 * backslash that would read as one. Everything else, non-ASCII letters included, is kept.
 */
public final class Printable {
  private Printable() {}

  public static String of(String text) {
    return escape(text, false);
  }

  /**
   * A name from an untrusted file (a tensor's, a state dict's key), escaped and at most {@value
   * #NAME_CHARACTERS} characters of it: a hostile file's 5-MB key must not make a 5-MB error line.
   */
  public static String name(String text) {
    if (text == null || text.length() <= NAME_CHARACTERS) {
      return of(text);
    }
    return of(text.substring(0, NAME_CHARACTERS)) + "… (" + text.length() + " characters)";
  }

  /** How much of a name {@link #name} shows. */
  public static final int NAME_CHARACTERS = 120;

  /** Lines of such text: its line breaks kept, every other control character escaped. */
  public static String lines(String text) {
    return escape(text, true);
  }

  private static String escape(String text, boolean keepLineBreaks) {
    if (text == null) {
      return "null";
    }
    StringBuilder out = null;
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      boolean control = (c < 0x20 && !(keepLineBreaks && c == '\n')) || (c >= 0x7F && c < 0xA0);
      boolean ambiguous = c == '\\' && i + 1 < text.length() && text.charAt(i + 1) == 'x';
      if (control || ambiguous) {
        if (out == null) {
          out = new StringBuilder(text.length() + 8).append(text, 0, i);
        }
        out.append(String.format("\\x%02x", (int) c));
      } else if (out != null) {
        out.append(c);
      }
    }
    return out == null ? text : out.toString();
  }
}
