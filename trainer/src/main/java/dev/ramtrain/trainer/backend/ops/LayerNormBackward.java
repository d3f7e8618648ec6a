package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.checkF32;

import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Operation;

/**
 * The backward pass of {@link LayerNormForward}: writes {@code dx = invStd * (g - mean(g) - xhat *
 * mean(g * xhat))} with {@code g = dy * gamma} over each group, and adds dL/dgamma ({@code Σ dy *
 * xhat}) and dL/dbeta ({@code Σ dy}) over every group to {@code dgamma} and {@code dbeta}.
 */
public record LayerNormBackward(
    DeviceBuffer x,
    DeviceBuffer dy,
    int outer,
    int size,
    int inner,
    DeviceBuffer gamma,
    DeviceBuffer savedMean,
    DeviceBuffer savedInvStd,
    DeviceBuffer dgamma,
    DeviceBuffer dbeta,
    DeviceBuffer dx)
    implements Operation {
  public LayerNormBackward {
    long count = LayerNormForward.groupsOf(outer, size, inner) * size;
    checkF32(x, count);
    checkF32(dy, count);
    checkF32(dx, count);
    checkF32(gamma, size);
    checkF32(dgamma, size);
    checkF32(dbeta, size);
    checkF32(savedMean, (long) outer * inner);
    checkF32(savedInvStd, (long) outer * inner);
  }
}
