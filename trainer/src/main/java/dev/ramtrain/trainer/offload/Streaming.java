package dev.ramtrain.trainer.offload;

import java.util.Set;

/**
 * How an offloaded model runs: the top-level layers streamed through {@code prefetchDepth} weight
 * slots (the others resident), whether the slots hold bf16 copies, whether activations are
 * checkpointed, and whether the host update is delayed one step (ZeRO-Offload's DPU: step t+1
 * computes with the weights from before step t's update, which runs beside it) once {@code
 * delayWarmupSteps} steps have run undelayed (the first, large updates of training are where the
 * staleness hurts).
 */
public record Streaming(
    Set<String> streamed,
    int prefetchDepth,
    boolean bf16Weights,
    boolean activationCheckpointing,
    boolean delayedUpdate,
    int delayWarmupSteps) {
  public Streaming {
    if (prefetchDepth < 1) {
      throw new IllegalArgumentException("prefetch depth must be >= 1, got " + prefetchDepth);
    }
    if (delayWarmupSteps < 0) {
      throw new IllegalArgumentException("delay warm-up steps must be >= 0");
    }
    streamed = Set.copyOf(streamed);
  }

  /** What {@code plan} decided, without a delayed update. */
  public static Streaming of(PlacementPlan plan) {
    return of(plan, false, 0);
  }

  /** What {@code plan} decided, with or without the delayed update. */
  public static Streaming of(PlacementPlan plan, boolean delayedUpdate, int delayWarmupSteps) {
    return new Streaming(
        Set.copyOf(plan.streamed()),
        Math.max(1, plan.prefetchDepth()),
        plan.bf16Weights(),
        plan.activationCheckpointing(),
        delayedUpdate,
        delayWarmupSteps);
  }
}
