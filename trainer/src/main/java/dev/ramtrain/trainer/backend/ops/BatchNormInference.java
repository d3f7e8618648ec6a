package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkChannelBlock;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Batch normalization in evaluation mode: the running statistics instead of the batch's; {@code
 * channelBlock} as in {@link BatchNormTrain}.
 */
public record BatchNormInference(
    DeviceBuffer x,
    int n,
    int c,
    int hw,
    DeviceBuffer gamma,
    DeviceBuffer beta,
    float eps,
    DeviceBuffer runningMean,
    DeviceBuffer runningVar,
    DeviceBuffer y,
    int channelBlock)
    implements Operation {
  /** Over NCHW input. */
  public BatchNormInference(
      DeviceBuffer x,
      int n,
      int c,
      int hw,
      DeviceBuffer gamma,
      DeviceBuffer beta,
      float eps,
      DeviceBuffer runningMean,
      DeviceBuffer runningVar,
      DeviceBuffer y) {
    this(x, n, c, hw, gamma, beta, eps, runningMean, runningVar, y, 1);
  }

  public BatchNormInference {
    checkChannelBlock(channelBlock, c);
    checkF32(x, (long) n * c * hw);
    checkF32(y, (long) n * c * hw);
    for (DeviceBuffer perChannel : new DeviceBuffer[] {gamma, beta, runningMean, runningVar}) {
      checkF32(perChannel, c);
    }
  }
}
