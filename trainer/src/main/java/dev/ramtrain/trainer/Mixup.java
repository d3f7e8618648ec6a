package dev.ramtrain.trainer;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.BlendBatch;
import dev.ramtrain.trainer.backend.ops.CutMixBatch;
import java.io.Serializable;
import java.util.SplittableRandom;

/**
 * timm's {@code Mixup} in its batch mode, on the device after the batch's copy: with probability
 * {@code prob} a batch is mixed, by cutmix with probability {@code switchProb} when both alphas are
 * set, with λ ~ Beta(α, α); mixup blends each sample with the batch's mirror image, cutmix pastes
 * the mirror's box of side √(1 - λ) (centre uniform, clipped) and corrects λ to the box's true
 * area. The loss then takes λ of each sample's smoothed target and 1 - λ of its mirror's
 * (SoftmaxCrossEntropy's mix: timm's mixup_target). A batch's draws come from the generator {@link
 * BatchAugmentation} seeds for it.
 */
public record Mixup(double mixupAlpha, double cutmixAlpha, double prob, double switchProb)
    implements Serializable {
  public static final Mixup OFF = new Mixup(0, 0, 1, 0.5);

  public Mixup {
    if (!(mixupAlpha >= 0) || !(cutmixAlpha >= 0)) {
      throw new IllegalArgumentException(
          "mixup and cutmix alphas must be >= 0, got " + mixupAlpha + " and " + cutmixAlpha);
    }
    if (!(prob >= 0 && prob <= 1) || !(switchProb >= 0 && switchProb <= 1)) {
      throw new IllegalArgumentException(
          "mixup probabilities must be in [0, 1], got " + prob + " and " + switchProb);
    }
  }

  public boolean enabled() {
    return prob > 0 && (mixupAlpha > 0 || cutmixAlpha > 0);
  }

  /** A batch's mix: λ, and the cutmix box {top, bottom, left, right} or null (blended). */
  record Draw(double lambda, int[] box) {}

  /** timm's _params_per_batch, rand_bbox and correct_lam, for images of height × width. */
  Draw draw(SplittableRandom rng, int height, int width) {
    if (!enabled() || rng.nextDouble() >= prob) {
      return new Draw(1, null);
    }
    boolean cutmix =
        mixupAlpha > 0 && cutmixAlpha > 0 ? rng.nextDouble() < switchProb : mixupAlpha == 0;
    double lambda = beta(rng, cutmix ? cutmixAlpha : mixupAlpha);
    if (!cutmix) {
      return new Draw(lambda, null);
    }
    double ratio = Math.sqrt(1 - lambda);
    int cutH = (int) (height * ratio);
    int cutW = (int) (width * ratio);
    int cy = rng.nextInt(height);
    int cx = rng.nextInt(width);
    int top = clip(cy - cutH / 2, height);
    int bottom = clip(cy + cutH / 2, height);
    int left = clip(cx - cutW / 2, width);
    int right = clip(cx + cutW / 2, width);
    double corrected = 1 - (double) (bottom - top) * (right - left) / ((double) height * width);
    return new Draw(corrected, new int[] {top, bottom, left, right});
  }

  /**
   * Mixes the batch {@code x} (NCHW, normalized) in place with the draws of {@code rng} and returns
   * λ for the loss (1: left as it was).
   */
  float apply(
      Backend backend,
      Stream s,
      DeviceBuffer x,
      int batch,
      ImageShape shape,
      SplittableRandom rng) {
    Draw d = draw(rng, shape.height(), shape.width());
    if (d.lambda() == 1) {
      return 1f;
    }
    if (d.box() == null) {
      long sample = (long) shape.channels() * shape.height() * shape.width();
      backend.run(s, BlendBatch.of(x, batch, sample, d.lambda()));
    } else {
      int[] b = d.box();
      backend.run(
          s,
          new CutMixBatch(
              x, batch, shape.channels(), shape.height(), shape.width(), b[0], b[1], b[2], b[3]));
    }
    return (float) d.lambda();
  }

  private static int clip(int v, int limit) {
    return Math.max(0, Math.min(limit, v));
  }

  /** Beta(α, α) as X / (X + Y) of two Gamma(α) draws (numpy's beta for a, b both above 1 too). */
  static double beta(SplittableRandom rng, double alpha) {
    double x = gamma(rng, alpha);
    double y = gamma(rng, alpha);
    return x + y == 0 ? 0.5 : x / (x + y);
  }

  /** Marsaglia and Tsang's Gamma(shape, 1); below shape 1, Gamma(shape + 1) · U^(1/shape). */
  static double gamma(SplittableRandom rng, double shape) {
    if (shape < 1) {
      return gamma(rng, shape + 1) * Math.pow(rng.nextDouble(), 1 / shape);
    }
    double d = shape - 1.0 / 3;
    double c = 1 / Math.sqrt(9 * d);
    while (true) {
      double z;
      double v;
      do {
        z = normal(rng);
        v = 1 + c * z;
      } while (v <= 0);
      v = v * v * v;
      double u = rng.nextDouble();
      if (u < 1 - 0.0331 * z * z * z * z || Math.log(u) < 0.5 * z * z + d * (1 - v + Math.log(v))) {
        return d * v;
      }
    }
  }

  private static double normal(SplittableRandom rng) {
    // Box-Muller on two uniforms, the first kept off 0
    double u = 1 - rng.nextDouble();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng.nextDouble());
  }
}
