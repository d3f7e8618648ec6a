package dev.ramtrain.trainer.offload;

import java.util.Set;

/**
 * How an offloaded model runs: the top-level layers streamed through {@code prefetchDepth} weight
 * slots (the others resident), whether the slots hold bf16 copies, whether activations are
 * checkpointed, and whether the host update is delayed one step (ZeRO-Offload's DPU: step t+1
 * computes with the weights from before step t's update, which runs beside it).
 */
public record Streaming(
    Set<String> streamed,
    int prefetchDepth,
    boolean bf16Weights,
    boolean activationCheckpointing,
    boolean delayedUpdate) {
  public Streaming {
    if (prefetchDepth < 1) {
      throw new IllegalArgumentException("prefetch depth must be >= 1, got " + prefetchDepth);
    }
    streamed = Set.copyOf(streamed);
  }

  /** What {@code plan} decided, with or without the delayed update. */
  public static Streaming of(PlacementPlan plan, boolean delayedUpdate) {
    return new Streaming(
        Set.copyOf(plan.streamed()),
        Math.max(1, plan.prefetchDepth()),
        plan.bf16Weights(),
        plan.activationCheckpointing(),
        delayedUpdate);
  }
}
