package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/** SGD with momentum (PyTorch's form: buf = μ·buf + g; nesterov uses g + μ·buf) and L2 decay. */
public record SgdStep(
    DeviceBuffer param,
    DeviceBuffer grad,
    DeviceBuffer momentum,
    float lr,
    float mu,
    float weightDecay,
    boolean nesterov)
    implements Operation {
  public SgdStep {
    checkF32(param, param.count());
    checkF32(grad, param.count());
    checkF32(momentum, param.count());
  }
}
