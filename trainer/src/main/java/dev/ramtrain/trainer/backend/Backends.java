package dev.ramtrain.trainer.backend;

import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one place a backend is chosen: every command (train, evaluate, predict, plan, the Spark
 * trainer task) opens its backend here, so a new backend is one more case in {@link #open}.
 */
public final class Backends {
  private static final Logger LOG = LoggerFactory.getLogger(Backends.class);

  private Backends() {}

  /**
   * Opens the backend {@code spec} asks for. {@code cuda} fails when no CUDA backend can be opened;
   * {@code auto} then falls back to the CPU backend, logging why once.
   */
  public static Backend open(BackendSpec spec) {
    return switch (spec.kind()) {
      case CPU -> new CpuBackend(spec.threads());
      case CUDA -> throw new BackendUnavailableException("backend cuda: " + cudaUnavailable());
      case AUTO -> {
        LOG.info("backend auto: {}; using the cpu backend", cudaUnavailable());
        yield new CpuBackend(spec.threads());
      }
    };
  }

  /** Why there is no CUDA backend: this build has none yet (the CUDA issue adds the probe). */
  private static String cudaUnavailable() {
    return "this build of ramtrain has no CUDA backend";
  }
}
