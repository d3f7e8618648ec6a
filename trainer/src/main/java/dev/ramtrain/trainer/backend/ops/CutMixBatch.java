package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * CutMix of an NCHW batch in place, as timm's Mixup does in its batch mode: the box rows [top,
 * bottom) × columns [left, right) of every channel of sample {@code i} replaced by those of sample
 * {@code batch - 1 - i} (timm's {@code x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]}: the
 * two samples of each pair swap their boxes).
 */
public record CutMixBatch(
    DeviceBuffer x,
    int batch,
    int channels,
    int height,
    int width,
    int top,
    int bottom,
    int left,
    int right)
    implements Operation {
  public CutMixBatch {
    if (batch < 1 || channels < 1 || height < 1 || width < 1) {
      throw new IllegalArgumentException(
          "cutmix of " + batch + "x" + channels + "x" + height + "x" + width);
    }
    if (top < 0 || top > bottom || bottom > height || left < 0 || left > right || right > width) {
      throw new IllegalArgumentException(
          "cutmix box rows ["
              + top
              + ", "
              + bottom
              + ") columns ["
              + left
              + ", "
              + right
              + ")"
              + " outside "
              + height
              + "x"
              + width);
    }
    checkF32(x, (long) batch * channels * height * width);
  }
}
