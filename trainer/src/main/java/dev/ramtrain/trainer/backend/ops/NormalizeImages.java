package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * uint8 HWC images (n×h×w×c) to F32 NCHW, {@code (x / 255 - mean[ch]) / std[ch]}: the normalization
 * that happens on the device, so only uint8 crosses the bus.
 */
public record NormalizeImages(
    DeviceBuffer u8, int n, int h, int w, int c, float[] mean, float[] std, DeviceBuffer out)
    implements Operation {
  public NormalizeImages {
    if (mean.length != c || std.length != c) {
      throw new IllegalArgumentException("mean and std need " + c + " values, one per channel");
    }
    checkCount(u8, (long) n * h * w * c);
    requireType(u8, DType.U8);
    checkF32(out, (long) n * h * w * c);
    mean = mean.clone(); // the work runs later: the caller may reuse its arrays
    std = std.clone();
  }

  /**
   * Per channel, {@code x * scale - shift} equals the formula above: both engines compute it so.
   */
  public float scale(int channel) {
    return 1f / (255f * std[channel]);
  }

  public float shift(int channel) {
    return mean[channel] / std[channel];
  }
}
