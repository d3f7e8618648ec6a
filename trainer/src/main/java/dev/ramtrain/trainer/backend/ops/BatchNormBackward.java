package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * The backward pass of {@link BatchNormTrain}: adds dL/dgamma and dL/dbeta to {@code dgamma} and
 * {@code dbeta}, and writes dL/dx (through the batch statistics) to {@code dx}.
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
    DeviceBuffer dx)
    implements Operation {
  public BatchNormBackward {
    checkF32(x, (long) n * c * hw);
    checkF32(dy, (long) n * c * hw);
    checkF32(dx, (long) n * c * hw);
    for (DeviceBuffer perChannel :
        new DeviceBuffer[] {gamma, savedMean, savedInvStd, dgamma, dbeta}) {
      checkF32(perChannel, c);
    }
  }
}
