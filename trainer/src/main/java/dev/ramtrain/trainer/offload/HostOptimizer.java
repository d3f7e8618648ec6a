package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.OptimizerSpec;
import dev.ramtrain.trainer.optim.ParamGroups;
import dev.ramtrain.trainer.optim.SgdSpec;
import java.util.List;

/**
 * An optimizer over an offloaded model's host slabs (master weights and gradients, in model order),
 * its state in pinned host memory allocated once. A step can be applied range by range: each
 * layer's range as soon as its gradient has reached the host, while backward goes on.
 */
public interface HostOptimizer extends AutoCloseable {
  /**
   * The host optimizer {@code spec} describes, over {@code masters} and {@code gradients}: the
   * parameters {@code layout} places there, grouped as the spec says.
   */
  static HostOptimizer create(
      OptimizerSpec spec,
      Backend backend,
      HostBuffer masters,
      HostBuffer gradients,
      ParamGroups.Layout layout,
      HostThreads threads) {
    ParamGroups groups = layout.groups(spec.groups());
    if (spec instanceof AdamWSpec adamw) {
      return new HostAdamW(backend, masters, gradients, adamw, groups, threads);
    }
    return new HostSgd(backend, masters, gradients, (SgdSpec) spec, groups, threads);
  }

  /**
   * Starts step {@code steps() + 1} at learning rate {@code lr}; its ranges are then updated
   * through what this returns, which keeps the step's coefficients (with a delayed update, the
   * previous step's ranges may still be updating after the next step has begun).
   */
  HostUpdate beginStep(float lr);

  /** The ranges it updates (of its slab, a ZeRO-1 share's from its first element). */
  ParamGroups groups();

  /** Steps begun so far. */
  int steps();

  /** Continues a resumed run: the next step is {@code steps + 1}. */
  void resumeAt(int steps);

  /** The state slabs, in the resident optimizer's order (AdamW: m, v; SGD: momentum). */
  List<HostBuffer> state();

  @Override
  void close();
}
