package dev.ramtrain.etl.image;

import java.io.Serializable;
import java.util.Locale;

/**
 * How preprocessing stores each image in its shards ({@code preprocess --store}): RAW pixels
 * (mapped and read in place: the fastest loader, the most bytes), JPEG (a fifth of the bytes or
 * less for photos, decoded by the loader), or AUTO: per image, JPEG where it takes at most half the
 * pixels' bytes, pixels where it would not (small or noisy images compress poorly and would only
 * cost decode time). JPEGs are encoded at {@code quality}, unless the source image is already a
 * sequential JPEG of exactly the stored size that decodes to exactly the stored pixels: then its
 * own bytes are kept.
 */
public record ImageStorage(Mode mode, int quality) implements Serializable {
  public static final ImageStorage RAW = new ImageStorage(Mode.RAW, 90);

  public enum Mode {
    RAW,
    JPEG,
    AUTO
  }

  public ImageStorage {
    if (quality < 1 || quality > 100) {
      throw new IllegalArgumentException(
          "ramtrain.etl.jpeg-quality must be in [1, 100], not " + quality);
    }
  }

  /** Whether the shards have an encoded image column (JPEG rows beside pixel rows). */
  public boolean encoded() {
    return mode != Mode.RAW;
  }

  /** The mode as the manifest and the command line spell it. */
  public String modeName() {
    return mode.name().toLowerCase(Locale.ROOT);
  }
}
