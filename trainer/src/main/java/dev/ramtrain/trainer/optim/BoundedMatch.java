package dev.ramtrain.trainer.optim;

import dev.ramtrain.settings.ConfigException;
import java.util.regex.Pattern;

/**
 * A whole-string regex match with a bound on the characters it may read: java.util.regex
 * backtracks, and a user's pattern such as seventeen {@code .*} then {@code !} took minutes on one
 * parameter name. Matching reads the name through a sequence that counts, and gives up past the
 * bound (millions of reads, where a sensible pattern takes hundreds) with a usage error naming the
 * setting.
 */
final class BoundedMatch {
  /** Characters one match may read. */
  static final long MAX_READS = 5_000_000;

  private BoundedMatch() {}

  /** Whether {@code pattern} matches all of {@code input}; {@code key} names the setting. */
  static boolean matches(Pattern pattern, String input, String key) {
    try {
      return pattern.matcher(new Counted(input)).matches();
    } catch (TooLong e) {
      throw new ConfigException(
          key
              + " = '"
              + pattern.pattern()
              + "': matching '"
              + input
              + "' read more than "
              + MAX_READS
              + " characters (a pattern that backtracks without end, such as many .* in a row);"
              + " simplify it");
    }
  }

  private static final class TooLong extends RuntimeException {
    TooLong() {
      super(null, null, false, false); // thrown to unwind the matcher, never shown
    }
  }

  /** {@code text}, counting every read of a character. */
  private static final class Counted implements CharSequence {
    private final String text;
    private long reads;

    Counted(String text) {
      this.text = text;
    }

    @Override
    public char charAt(int index) {
      if (++reads > MAX_READS) {
        throw new TooLong();
      }
      return text.charAt(index);
    }

    @Override
    public int length() {
      return text.length();
    }

    @Override
    public CharSequence subSequence(int start, int end) {
      return text.substring(start, end);
    }

    @Override
    public String toString() {
      return text;
    }
  }
}
