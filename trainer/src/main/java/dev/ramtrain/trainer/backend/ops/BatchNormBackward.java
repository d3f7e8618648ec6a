package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkMask;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * The backward pass of {@link BatchNormTrain}: adds dL/dgamma and dL/dbeta to {@code dgamma} and
 * {@code dbeta}, and writes dL/dx (through the batch statistics) to {@code dx}; x, dy and dx in the
 * layout {@code channelBlock} says. With the {@code reluMask} of a {@link BatchNormTrain} that
 * fused a ReLU (null: none), dy is the gradient of the ReLU's output, masked as the forward wrote.
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
    int channelBlock,
    DeviceBuffer reluMask)
    implements Operation {
  public BatchNormBackward {
    checkChannelBlock(channelBlock, c);
    checkF32(x, (long) n * c * hw);
    checkF32(dy, (long) n * c * hw);
    checkF32(dx, (long) n * c * hw);
    for (DeviceBuffer perChannel :
        new DeviceBuffer[] {gamma, savedMean, savedInvStd, dgamma, dbeta}) {
      checkF32(perChannel, c);
    }
    checkMask(reluMask);
  }
}
