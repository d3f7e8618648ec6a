package dev.ramtrain.trainer.checkpoint;

import java.io.IOException;
import java.nio.file.Path;

/**
 * Where the training loop hands its checkpoints: after each epoch, and every so many steps within
 * one. The run directory decides what else a checkpoint commits (a replaced run's files go once the
 * new run has its first).
 */
@FunctionalInterface
public interface CheckpointSink {
  /**
   * Saves {@code snapshot} taken after {@code epochsDone} whole epochs and {@code globalStep} steps
   * as checkpoint {@code name} ({@link Checkpoints#name}); returns its folder.
   */
  Path save(String name, int epochsDone, long globalStep, Checkpoints.Snapshot snapshot)
      throws IOException;

  /** Names checkpoint {@code name}, saved before, the run's best ({@code checkpoints/best}). */
  default void markBest(String name) throws IOException {}
}
