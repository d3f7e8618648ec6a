package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.CounterRng;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * torchvision's ColorJitter(brightness, contrast, saturation) on each image of a normalized NCHW
 * batch, in place: back to [0, 1] ({@code v = x · std + mean}), the three adjustments in a random
 * order, each clamped to [0, 1] (brightness {@code f v}, contrast {@code f v + (1 - f) m} with m
 * the image's mean grey, saturation {@code f v + (1 - f) grey}, grey = 0.2989 r + 0.587 g + 0.114
 * b), normalized again ({@code (v - mean) / std}). Sample i's order and factors come from the
 * counter RNG at (seed, 8 i + k): k = 0, 1 shuffle the three, k = 2, 3, 4 draw each factor
 * uniformly in [max(0, 1 - s), 1 + s] for its strength s (0 leaves it out). Grey images have no
 * saturation.
 */
public record ColorJitter(
    DeviceBuffer x,
    int batch,
    int channels,
    int height,
    int width,
    float[] mean,
    float[] std,
    float brightness,
    float contrast,
    float saturation,
    long seed)
    implements Operation {
  /** The grey of torchvision's rgb_to_grayscale. */
  public static final float RED = 0.2989f;

  public static final float GREEN = 0.587f;
  public static final float BLUE = 0.114f;

  public ColorJitter {
    if (batch < 1 || (channels != 1 && channels != 3) || height < 1 || width < 1) {
      throw new IllegalArgumentException(
          "colour jitter of " + batch + "x" + channels + "x" + height + "x" + width);
    }
    if (mean.length != channels || std.length != channels) {
      throw new IllegalArgumentException("mean and std need " + channels + " values");
    }
    if (!(brightness >= 0) || !(contrast >= 0) || !(saturation >= 0)) {
      throw new IllegalArgumentException(
          "colour jitter strengths must be >= 0: "
              + brightness
              + ", "
              + contrast
              + ", "
              + saturation);
    }
    checkF32(x, (long) batch * channels * height * width);
    mean = mean.clone();
    std = std.clone();
  }

  /** Sample {@code i}'s adjustments in order (0 brightness, 1 contrast, 2 saturation). */
  public static int[] order(long seed, int i) {
    int[] order = {0, 1, 2};
    for (int k = 2; k >= 1; k--) { // Fisher-Yates on two draws; a float's product in double
      int j = (int) ((double) CounterRng.uniform(seed, 8L * i + (2 - k)) * (k + 1));
      int t = order[k];
      order[k] = order[j];
      order[j] = t;
    }
    return order;
  }

  /** The strength of adjustment {@code which} (0 brightness, 1 contrast, 2 saturation). */
  public float strength(int which) {
    return which == 0 ? brightness : which == 1 ? contrast : saturation;
  }

  /** Sample {@code i}'s factor for adjustment {@code which} of strength {@code strength}. */
  public static float factor(float strength, long seed, int i, int which) {
    float u = CounterRng.uniform(seed, 8L * i + 2 + which);
    float lo = Math.max(0f, 1f - strength);
    float hi = 1f + strength;
    return lo + (hi - lo) * u;
  }
}
