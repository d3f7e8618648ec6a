package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * Writes the L2 norm of {@code grads} to {@code norm[0]} and, when {@code maxNorm > 0} and the norm
 * exceeds it, scales {@code grads} by {@code maxNorm / (norm + 1e-6)}, as PyTorch's
 * clip_grad_norm_. Stays on the device: no host round-trip per step.
 */
public record ClipGradNorm(DeviceBuffer grads, float maxNorm, DeviceBuffer norm)
    implements Operation {
  public ClipGradNorm {
    checkF32(grads, grads.count());
    checkF32(norm, 1);
  }
}
