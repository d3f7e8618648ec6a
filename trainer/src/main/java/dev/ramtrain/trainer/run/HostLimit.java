package dev.ramtrain.trainer.run;

import java.io.Serializable;

/**
 * How much host memory outside the JVM heap a training run may take: pinned weights, gradients and
 * optimizer state, and on the CPU backend the "device" itself. In one process, what the machine has
 * available; in a Spark executor, what the executor was given beside its heap (jobs reads it from
 * Spark's settings: {@code ExecutorMemory}). Planning with the machine's memory inside an executor
 * would plan for memory the container does not have.
 *
 * @param bytes the limit; {@link Long#MAX_VALUE}: none besides the machine's
 * @param source where the limit comes from, with the keys that raise it
 */
public record HostLimit(long bytes, String source) implements Serializable {
  /** A process of its own: the machine's available memory is the only limit. */
  public static final HostLimit MACHINE = new HostLimit(Long.MAX_VALUE, "this machine");

  /** {@code available} bytes the machine reports, within this limit. */
  public long cap(long available) {
    return Math.min(available, bytes);
  }

  /** Whether this limit, not the machine, decides for {@code available} bytes. */
  public boolean binds(long available) {
    return bytes < available;
  }
}
