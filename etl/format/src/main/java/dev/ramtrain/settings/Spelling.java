package dev.ramtrain.settings;

import java.util.Locale;

/**
 * How a setting's choice is written (in config files, on the command line, in a checkpoint's
 * state.json): the enum constant in lower case with hyphens, {@code CENTER_CROP} as {@code
 * center-crop}. One spelling both where settings are read and where runs record them.
 */
public final class Spelling {
  private Spelling() {}

  public static String of(Enum<?> constant) {
    return constant.name().toLowerCase(Locale.ROOT).replace('_', '-');
  }
}
