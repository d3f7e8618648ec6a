package dev.ramtrain.trainer.offload;

import java.io.Serializable;

/**
 * Whether and how a run offloads to host memory ({@code ramtrain.offload.*}): the mode, the device
 * budget (0: the device's memory minus {@code marginBytes}), the weight ring's depth, bf16 slots,
 * ZeRO-Offload's delayed update after {@code delayWarmupSteps} plain steps, the host threads of the
 * optimizer, how a clipped update runs, and the precision of the host optimizer's state.
 */
public record OffloadSpec(
    Mode mode,
    long budgetBytes,
    long marginBytes,
    int prefetchDepth,
    boolean bf16Weights,
    boolean delayedUpdate,
    int delayWarmupSteps,
    int hostThreads,
    ClipUpdate clipUpdate,
    OptimizerState optimizerState)
    implements Serializable {

  /**
   * The precision the host AdamW keeps its moments in: fp32 (8 bytes a parameter, the resident
   * optimizer's bits), or bf16 rounded stochastically (4 bytes, RamTorch's default: fewer bytes for
   * the host's memory to move each step, and moments that keep their expected value).
   */
  public enum OptimizerState {
    FP32(4),
    BF16(2);

    private final int bytesPerValue;

    OptimizerState(int bytesPerValue) {
      this.bytesPerValue = bytesPerValue;
    }

    /** Bytes of one state value. */
    public int bytesPerValue() {
      return bytesPerValue;
    }
  }

  /**
   * How a clipped step's host update runs: {@code speculative} updates each layer as its gradient
   * lands, as an unclipped step does, and redoes the step from a kept copy of what it changed when
   * the norm says clip (or is not finite): the serial update's bits, off the critical path, for one
   * more copy of the masters and optimizer state in host memory; {@code serial} waits for the whole
   * norm and updates after backward; {@code auto} speculates where the copy fits the host.
   */
  public enum ClipUpdate {
    AUTO,
    SPECULATIVE,
    SERIAL
  }

  /** When training offloads: only if resident does not fit, always, or never. */
  public enum Mode {
    AUTO,
    ON,
    OFF
  }

  public OffloadSpec {
    java.util.Objects.requireNonNull(clipUpdate, "clipUpdate");
    java.util.Objects.requireNonNull(optimizerState, "optimizerState");
    if (budgetBytes < 0 || marginBytes < 0) {
      throw new IllegalArgumentException("budget and margin must be >= 0");
    }
    if (prefetchDepth < 1 || delayWarmupSteps < 0 || hostThreads < 1) {
      throw new IllegalArgumentException(
          "prefetch depth and host threads must be >= 1, delay warm-up steps >= 0");
    }
  }

  /**
   * The budget on a device of {@code memoryBytes}: the one given, or memory minus the margin;
   * throws when the margin leaves nothing.
   */
  public long budget(long memoryBytes) {
    long budget = budgetBytes > 0 ? budgetBytes : memoryBytes - marginBytes;
    if (budget <= 0) {
      throw new IllegalArgumentException(
          "the margin (" + marginBytes + " bytes) leaves no device memory of " + memoryBytes);
    }
    return budget;
  }
}
