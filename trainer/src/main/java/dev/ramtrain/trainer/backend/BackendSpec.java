package dev.ramtrain.trainer.backend;

import java.io.Serializable;

/** Which backend a run asks for ({@code ramtrain.train.backend}) and the host cores it may use. */
public record BackendSpec(Kind kind, int threads) implements Serializable {

  /** {@code auto}: CUDA when a usable GPU is found, else the CPU backend. */
  public enum Kind {
    CPU,
    CUDA,
    AUTO
  }

  public BackendSpec {
    if (threads < 1) {
      throw new IllegalArgumentException("threads must be >= 1, got " + threads);
    }
  }
}
