package dev.ramtrain.trainer;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.random.Seeds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.ColorJitter;
import java.io.Serializable;
import java.util.SplittableRandom;

/**
 * What happens to a batch on the device between its normalization and the forward pass, in timm's
 * order: colour jitter of each image ({@code colorJitter}, timm's {@code --color-jitter}: the
 * strength of brightness, contrast and saturation alike, 0 = off), then {@link Mixup} of the batch.
 * Every draw comes from (seed, the batch's number across ranks and micro-batches: the numbering of
 * the dropout masks), so a resumed run and any rank layout draw alike.
 */
public record BatchAugmentation(float colorJitter, Mixup mixup, long seed) implements Serializable {
  public static final BatchAugmentation NONE = new BatchAugmentation(0, Mixup.OFF, 0);
  private static final long JITTER = 0xC010;
  private static final long MIX = 0x313C;

  public BatchAugmentation {
    if (!(colorJitter >= 0)) {
      throw new IllegalArgumentException("colour jitter must be >= 0, got " + colorJitter);
    }
  }

  /**
   * Augments the normalized NCHW batch {@code x} of batch number {@code batchNumber} in place;
   * returns mixup's λ for the loss (1: the targets are each row's own).
   */
  float apply(
      Backend backend,
      Stream s,
      DeviceBuffer x,
      int batch,
      ImageShape shape,
      float[] mean,
      float[] std,
      long batchNumber) {
    if (colorJitter > 0) {
      backend.run(
          s,
          new ColorJitter(
              x,
              batch,
              shape.channels(),
              shape.height(),
              shape.width(),
              mean,
              std,
              colorJitter,
              colorJitter,
              colorJitter,
              Seeds.mix(seed, batchNumber, JITTER)));
    }
    if (!mixup.enabled()) {
      return 1f;
    }
    SplittableRandom rng = new SplittableRandom(Seeds.mix(seed, batchNumber, MIX));
    return mixup.apply(backend, s, x, batch, shape, rng);
  }
}
