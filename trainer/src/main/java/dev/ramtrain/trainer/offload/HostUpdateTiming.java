package dev.ramtrain.trainer.offload;

/**
 * When an offloaded step's host update runs, which decides how much of it the step waits for
 * ({@link HostUpdateCost}).
 */
public enum HostUpdateTiming {
  /** Unclipped: each layer's update as its gradient lands, beside the rest of backward. */
  AS_GRADIENTS_LAND,
  /**
   * Clipped, speculatively ({@link SpeculativeClip}): as the gradients land, after keeping a copy
   * of what each update writes and summing the norm's chunks; redone only where the norm clips.
   */
  SPECULATIVE,
  /** Clipped, serially: after backward, once the whole norm is known. */
  AFTER_BACKWARD,
  /**
   * One step stale (ZeRO-Offload's delayed update): each layer's as its gradient lands, on into the
   * next forward, which computes with the weights published before it; the next backward, which
   * refills the gradients, waits for it.
   */
  DELAYED,
  /** One step stale and clipped: the whole update after backward, beside the next forward. */
  DELAYED_AFTER_BACKWARD;

  /**
   * The timing a run uses: delayed where asked (after backward when clipped, {@code clipNorm} > 0),
   * else for a clipped run speculative or serial, else as the gradients land.
   */
  public static HostUpdateTiming of(boolean delayed, float clipNorm, boolean speculative) {
    if (delayed) {
      return clipNorm > 0 ? DELAYED_AFTER_BACKWARD : DELAYED;
    }
    if (clipNorm <= 0) {
      return AS_GRADIENTS_LAND;
    }
    return speculative ? SPECULATIVE : AFTER_BACKWARD;
  }

  /** The timing's name in settings and output: as-gradients-land, speculative, .... */
  public String label() {
    return name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
  }
}
