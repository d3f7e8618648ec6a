package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** AdamW (decoupled weight decay) step {@code step} (1-based), as torch.optim.AdamW. */
public record AdamWStep(
    DeviceBuffer param,
    DeviceBuffer grad,
    DeviceBuffer m,
    DeviceBuffer v,
    float lr,
    float beta1,
    float beta2,
    float eps,
    float weightDecay,
    int step)
    implements Operation {
  public AdamWStep {
    if (step < 1) {
      throw new IllegalArgumentException("AdamW steps count from 1, got " + step);
    }
    checkF32(param, param.count());
    checkF32(grad, param.count());
    checkF32(m, param.count());
    checkF32(v, param.count());
  }

  /** The step's constants, computed once as both engines use them. */
  public AdamWMath math() {
    return AdamWMath.of(lr, beta1, beta2, eps, weightDecay, step);
  }
}
