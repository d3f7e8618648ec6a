package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * The backward pass of {@link BatchNormTrain}: adds dL/dgamma and dL/dbeta to {@code dgamma} and
 * {@code dbeta}, and writes dL/dx (through the batch statistics) to {@code dx}; x, dy and dx in the
 * layout {@code channelBlock} says.
 */
public record BatchNormBackward(
    DeviceBuffer x,
    DeviceBuffer dy,
    int n,
    int c,
    int hw,
    DeviceBuffer gamma,
    DeviceBuffer savedMean,
    DeviceBuffer savedInvStd,
    DeviceBuffer dgamma,
    DeviceBuffer dbeta,
    DeviceBuffer dx,
    int channelBlock)
    implements Operation {
  /** Over NCHW tensors. */
  public BatchNormBackward(
      DeviceBuffer x,
      DeviceBuffer dy,
      int n,
      int c,
      int hw,
      DeviceBuffer gamma,
      DeviceBuffer savedMean,
      DeviceBuffer savedInvStd,
      DeviceBuffer dgamma,
      DeviceBuffer dbeta,
      DeviceBuffer dx) {
    this(x, dy, n, c, hw, gamma, savedMean, savedInvStd, dgamma, dbeta, dx, 1);
  }

  public BatchNormBackward {
    checkChannelBlock(channelBlock, c);
    checkF32(x, (long) n * c * hw);
    checkF32(dy, (long) n * c * hw);
    checkF32(dx, (long) n * c * hw);
    for (DeviceBuffer perChannel :
        new DeviceBuffer[] {gamma, savedMean, savedInvStd, dgamma, dbeta}) {
      checkF32(perChannel, c);
    }
  }
}
