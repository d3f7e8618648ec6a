package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * Batch normalization in training mode over NCHW input ({@code n} images, {@code c} channels,
 * {@code hw} positions), as nn.BatchNorm2d: normalizes each channel with its batch mean and biased
 * variance, then {@code y = gamma * xhat + beta}; saves the mean and {@code 1 / sqrt(var + eps)}
 * per channel for the backward pass and moves the running statistics by {@code momentum} (the
 * running variance is the unbiased one). {@code channelBlock} is the layout of x and y ({@link
 * dev.ramtrain.trainer.backend.ArgumentChecks#checkChannelBlock}: 1 for NCHW).
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
    int channelBlock)
    implements Operation {
  /** Over NCHW input. */
  public BatchNormTrain(
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
      DeviceBuffer savedInvStd) {
    this(
        x,
        n,
        c,
        hw,
        gamma,
        beta,
        eps,
        momentum,
        runningMean,
        runningVar,
        y,
        savedMean,
        savedInvStd,
        1);
  }

  public BatchNormTrain {
    checkChannelBlock(channelBlock, c);
    checkF32(x, (long) n * c * hw);
    checkF32(y, (long) n * c * hw);
    for (DeviceBuffer perChannel :
        new DeviceBuffer[] {gamma, beta, runningMean, runningVar, savedMean, savedInvStd}) {
      checkF32(perChannel, c);
    }
  }
}
