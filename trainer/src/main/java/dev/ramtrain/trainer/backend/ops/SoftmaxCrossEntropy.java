package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * Softmax cross-entropy over rows×classes logits with I32 labels and label smoothing ε (targets 1 -
 * ε + ε/classes on the label, ε/classes elsewhere). Writes each row's loss to {@code loss} and
 * {@code dlogits = (softmax - target) / rows}, the gradient of the mean loss.
 */
public record SoftmaxCrossEntropy(
    DeviceBuffer logits,
    DeviceBuffer labels,
    int rows,
    int classes,
    float smoothing,
    DeviceBuffer loss,
    DeviceBuffer dlogits)
    implements Operation {
  public SoftmaxCrossEntropy {
    checkF32(logits, (long) rows * classes);
    checkCount(labels, rows);
    requireType(labels, DType.I32);
    checkF32(loss, rows);
    checkF32(dlogits, (long) rows * classes);
  }
}
