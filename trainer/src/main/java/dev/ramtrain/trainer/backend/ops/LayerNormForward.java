package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Layer normalization: {@code x} read as [outer, size, inner], each group of {@code size} values at
 * one (outer, inner) index normalized by its own mean and biased variance, then {@code y = gamma[j]
 * * xhat + beta[j]}. {@code inner == 1} is nn.LayerNormForward over the last dimension (a
 * transformer's [tokens, features]); [n, c, h·w] is timm's LayerNorm2d over the channels of NCHW
 * (ConvNeXt). Saves each group's mean and {@code 1 / sqrt(var + eps)} for the backward pass.
 */
public record LayerNormForward(
    DeviceBuffer x,
    int outer,
    int size,
    int inner,
    DeviceBuffer gamma,
    DeviceBuffer beta,
    float eps,
    DeviceBuffer y,
    DeviceBuffer savedMean,
    DeviceBuffer savedInvStd)
    implements Operation {
  public LayerNormForward {
    long count = groupsOf(outer, size, inner) * size;
    checkF32(x, count);
    checkF32(y, count);
    checkF32(gamma, size);
    checkF32(beta, size);
    checkF32(savedMean, (long) outer * inner);
    checkF32(savedInvStd, (long) outer * inner);
    if (!(eps > 0)) {
      throw new IllegalArgumentException("layer norm eps must be > 0, got " + eps);
    }
  }

  /** Groups normalized: one per (outer, inner) index. */
  static long groupsOf(int outer, int size, int inner) {
    if (outer < 0 || size < 1 || inner < 1) {
      throw new IllegalArgumentException(
          "layer norm over [" + outer + ", " + size + ", " + inner + "]");
    }
    return (long) outer * inner;
  }
}
