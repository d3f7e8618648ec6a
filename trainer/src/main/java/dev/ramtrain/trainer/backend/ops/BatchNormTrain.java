package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkMask;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Batch normalization in training mode over NCHW input ({@code n} images, {@code c} channels,
 * {@code hw} positions), as nn.BatchNorm2d: normalizes each channel with its batch mean and biased
 * variance, then {@code y = gamma * xhat + beta}; saves the mean and {@code 1 / sqrt(var + eps)}
 * per channel for the backward pass and moves the running statistics by {@code momentum} (the
 * running variance is the unbiased one). {@code channelBlock} is the layout of x and y ({@link
 * dev.ramtrain.trainer.backend.ArgumentChecks#checkChannelBlock}: 1 for NCHW).
 *
 * <p>With a {@code reluMask} (null: none), a ReLU is fused: y is {@code max(gamma * xhat + beta,
 * 0)}, and the engine writes into the mask (U8, {@link
 * dev.ramtrain.trainer.backend.Backend#normReluMaskBytes} bytes, an engine's own format) what
 * {@link BatchNormBackward} with the same mask needs; only engines that fuse them take one.
 */
public record BatchNormTrain(
    DeviceBuffer x,
    int n,
    int c,
    int hw,
    DeviceBuffer gamma,
    DeviceBuffer beta,
    float eps,
    float momentum,
    DeviceBuffer runningMean,
    DeviceBuffer runningVar,
    DeviceBuffer y,
    DeviceBuffer savedMean,
    DeviceBuffer savedInvStd,
    int channelBlock,
    DeviceBuffer reluMask)
    implements Operation {
  public BatchNormTrain {
    checkChannelBlock(channelBlock, c);
    checkF32(x, (long) n * c * hw);
    checkF32(y, (long) n * c * hw);
    for (DeviceBuffer perChannel :
        new DeviceBuffer[] {gamma, beta, runningMean, runningVar, savedMean, savedInvStd}) {
      checkF32(perChannel, c);
    }
    checkMask(reluMask);
  }
}
