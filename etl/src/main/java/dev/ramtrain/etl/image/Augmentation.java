package dev.ramtrain.etl.image;

import java.io.Serializable;

/**
 * Offline augmentation: {@code copies} extra randomized copies of each sample (random resized crop,
 * horizontal flip, rotation, colour jitter), each drawn from a generator seeded by (seed, sample
 * id, copy index), so a re-run produces the same copies whatever the partitioning.
 */
public record Augmentation(
    int copies,
    boolean keepOriginal,
    double scaleMin,
    double scaleMax,
    double ratioMin,
    double ratioMax,
    double flipProbability,
    double rotationDegrees,
    double brightness,
    double contrast,
    double saturation)
    implements Serializable {

  public static final Augmentation NONE =
      new Augmentation(0, true, 0.08, 1.0, 3.0 / 4, 4.0 / 3, 0.5, 0, 0, 0, 0);

  public Augmentation {
    check(copies >= 0, "copies must be >= 0");
    check(copies > 0 || keepOriginal, "with copies = 0 the original must be kept");
    check(
        0 < scaleMin && scaleMin <= scaleMax && scaleMax <= 1,
        "need 0 < scale-min <= scale-max <= 1");
    check(0 < ratioMin && ratioMin <= ratioMax, "need 0 < ratio-min <= ratio-max");
    check(0 <= flipProbability && flipProbability <= 1, "flip probability must be in [0, 1]");
    check(rotationDegrees >= 0 && rotationDegrees <= 180, "rotation must be in [0, 180] degrees");
    check(brightness >= 0 && brightness < 1, "brightness must be in [0, 1)");
    check(contrast >= 0 && contrast < 1, "contrast must be in [0, 1)");
    check(saturation >= 0 && saturation < 1, "saturation must be in [0, 1)");
  }

  /** Outputs per input sample. */
  public int outputsPerSample() {
    return copies + (keepOriginal ? 1 : 0);
  }

  private static void check(boolean ok, String message) {
    if (!ok) {
      throw new IllegalArgumentException("augmentation: " + message);
    }
  }
}
