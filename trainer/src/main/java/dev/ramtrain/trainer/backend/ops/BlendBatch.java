package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Mixup of a batch in place, as timm's Mixup does in its batch mode: each sample blended with the
 * batch's mirror image, {@code x[i] = λ x[i] + (1 - λ) x[batch - 1 - i]}, each product rounded to
 * fp32 before the sum (timm's {@code x.mul_(λ).add_(x.flip(0).mul_(1 - λ))}); {@code oneMinus} is 1
 * - λ rounded once, so every engine multiplies by the same two floats.
 */
public record BlendBatch(DeviceBuffer x, int batch, long sampleSize, float lambda, float oneMinus)
    implements Operation {
  public BlendBatch {
    if (batch < 1 || sampleSize < 1 || !(lambda >= 0 && lambda <= 1)) {
      throw new IllegalArgumentException(
          "mixup of " + batch + " samples of " + sampleSize + " at λ " + lambda);
    }
    checkF32(x, batch * sampleSize);
  }

  /** λ and its complement, rounded as timm's float32 multiplications round them. */
  public static BlendBatch of(DeviceBuffer x, int batch, long sampleSize, double lambda) {
    return new BlendBatch(x, batch, sampleSize, (float) lambda, (float) (1 - lambda));
  }
}
