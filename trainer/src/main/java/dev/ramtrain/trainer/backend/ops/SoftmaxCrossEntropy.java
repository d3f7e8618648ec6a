package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkCount;
import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;
import static dev.ramtrain.trainer.backend.ArgumentChecks.requireType;

import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Softmax cross-entropy over rows×classes logits with I32 labels and label smoothing ε (targets 1 -
 * ε + ε/classes on the label, ε/classes elsewhere). Writes each row's loss to {@code loss} and
 * {@code dlogits = (softmax - target) / rows}, the gradient of the mean loss. With {@code mix} λ
 * below 1 (mixup or cutmix, timm's mixup_target), row i's target is λ times its own and 1 - λ times
 * that of row {@code rows - 1 - i}, the sample it was mixed with; computed in double.
 */
public record SoftmaxCrossEntropy(
    DeviceBuffer logits,
    DeviceBuffer labels,
    int rows,
    int classes,
    float smoothing,
    float mix,
    DeviceBuffer loss,
    DeviceBuffer dlogits)
    implements Operation {
  public SoftmaxCrossEntropy {
    if (!(mix >= 0 && mix <= 1)) {
      throw new IllegalArgumentException("mixed targets at λ " + mix + ": outside [0, 1]");
    }
    checkF32(logits, (long) rows * classes);
    checkCount(labels, rows);
    requireType(labels, DType.I32);
    checkF32(loss, rows);
    checkF32(dlogits, (long) rows * classes);
  }

  /** Hard labels, each row's own (λ = 1). */
  public SoftmaxCrossEntropy(
      DeviceBuffer logits,
      DeviceBuffer labels,
      int rows,
      int classes,
      float smoothing,
      DeviceBuffer loss,
      DeviceBuffer dlogits) {
    this(logits, labels, rows, classes, smoothing, 1f, loss, dlogits);
  }
}
