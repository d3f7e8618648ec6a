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
    return create(
        spec,
        backend,
        new Slab(masters, gradients, layout, 0, Bf16Copies.NONE),
        threads,
        OffloadSpec.OptimizerState.FP32,
        0);
  }

  /**
   * The same over {@code slab}, AdamW's moments in {@code state} (SGD's momentum is fp32), the
   * stochastic rounding of bf16 moments drawn from {@code seed}.
   */
  static HostOptimizer create(
      OptimizerSpec spec,
      Backend backend,
      Slab slab,
      HostThreads threads,
      OffloadSpec.OptimizerState state,
      long seed) {
    ParamGroups groups = slab.layout().groups(spec.groups());
    if (spec instanceof AdamWSpec adamw) {
      return new HostAdamW(
          backend,
          slab.masters(),
          slab.gradients(),
          adamw,
          groups,
          threads,
          state,
          slab.copies(),
          slab.firstElement(),
          seed);
    }
    return new HostSgd(backend, slab.masters(), slab.gradients(), (SgdSpec) spec, groups, threads);
  }

  /**
   * What a host optimizer updates: {@code masters} with {@code gradients}, the parameters {@code
   * layout} places there, the first being the model's {@code firstElement} (a ZeRO-1 share's
   * start), and where the update writes the bf16 copies of what it updates.
   */
  record Slab(
      HostBuffer masters,
      HostBuffer gradients,
      ParamGroups.Layout layout,
      long firstElement,
      Bf16Copies copies) {}

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

  /** Bytes of each value in the state slabs: 4 (fp32), or 2 (bf16 moments). */
  default int stateBytesPerValue() {
    return 4;
  }

  @Override
  void close();
}
