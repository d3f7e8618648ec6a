package dev.ramtrain.trainer.data;

import java.util.function.DoubleSupplier;

/**
 * torchvision's {@code RandomResizedCrop(size, scale, ratio)}: a region of a random share of the
 * image's area ({@code scale}) and aspect ratio (log-uniform in {@code ratio}), up to 10 tries,
 * else the central fallback, resized to {@code height × width} (0: the stored size). The arithmetic
 * is torchvision's to the bit (its float32 log and exp, Python's round half to even), on uniform
 * draws the loader makes from (seed, epoch, sample id): uniform(a, b) is float32(a + (b - a) u) and
 * randint(lo, hi) is lo + ⌊u (hi - lo)⌋ (trainer/src/test/goldens/make_crop_goldens.py runs
 * torchvision's own code on such draws).
 */
public record RandomResizedCrop(
    int height, int width, double scaleMin, double scaleMax, double ratioMin, double ratioMax)
    implements InputResize {
  /** torchvision's defaults: scale (0.08, 1), ratio (3/4, 4/3). */
  public static RandomResizedCrop torchvisionDefaults(int height, int width) {
    return new RandomResizedCrop(height, width, 0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0);
  }

  public RandomResizedCrop {
    if (height < 0 || width < 0) {
      throw new IllegalArgumentException("output size " + height + "x" + width + ": 0 or more");
    }
    if (!(scaleMin > 0 && scaleMin <= scaleMax)) {
      throw new IllegalArgumentException(
          "scale (" + scaleMin + ", " + scaleMax + "): needs 0 < min <= max");
    }
    if (!(ratioMin > 0 && ratioMin <= ratioMax && Double.isFinite(ratioMax))) {
      throw new IllegalArgumentException(
          "ratio (" + ratioMin + ", " + ratioMax + "): needs 0 < min <= max");
    }
  }

  @Override
  public CropPlan plan(int imageHeight, int imageWidth, DoubleSupplier uniform) {
    int[] box = box(imageHeight, imageWidth, uniform);
    return new CropPlan(
        box[0], box[1], box[2], box[3], heightFor(imageHeight), widthFor(imageWidth), 0, 0);
  }

  /** torchvision's get_params: {top, left, height, width} of the region. */
  int[] box(int imageHeight, int imageWidth, DoubleSupplier uniform) {
    double area = (double) imageHeight * imageWidth;
    float logMin = (float) Math.log((float) ratioMin); // torch.log(torch.tensor(ratio)): float32
    float logMax = (float) Math.log((float) ratioMax);
    for (int attempt = 0; attempt < 10; attempt++) {
      double targetArea = area * uniform(scaleMin, scaleMax, uniform);
      double aspect = (float) Math.exp(uniform(logMin, logMax, uniform));
      int w = (int) Math.rint(Math.sqrt(targetArea * aspect));
      int h = (int) Math.rint(Math.sqrt(targetArea / aspect));
      if (0 < w && w <= imageWidth && 0 < h && h <= imageHeight) {
        int top = randint(imageHeight - h + 1, uniform);
        int left = randint(imageWidth - w + 1, uniform);
        return new int[] {top, left, h, w};
      }
    }
    double inRatio = (double) imageWidth / imageHeight;
    double lo = Math.min(ratioMin, ratioMax);
    double hi = Math.max(ratioMin, ratioMax);
    int w = imageWidth;
    int h = imageHeight;
    if (inRatio < lo) {
      h = (int) Math.rint(w / lo);
    } else if (inRatio > hi) {
      w = (int) Math.rint(h * hi);
    }
    return new int[] {(imageHeight - h) / 2, (imageWidth - w) / 2, h, w};
  }

  /** torch.empty(1).uniform_(a, b).item(): a float32 value. */
  private static float uniform(double a, double b, DoubleSupplier uniform) {
    return (float) (a + (b - a) * uniform.getAsDouble());
  }

  private static int randint(int bound, DoubleSupplier uniform) {
    return (int) Math.floor(uniform.getAsDouble() * bound);
  }
}
