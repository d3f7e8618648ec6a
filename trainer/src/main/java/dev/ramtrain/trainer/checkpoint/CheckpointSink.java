package dev.ramtrain.trainer.checkpoint;

import java.io.IOException;
import java.nio.file.Path;

/**
 * Where the training loop hands its checkpoint after each epoch. The run directory decides what
 * else a checkpoint commits (a replaced run's files go once the new run has its first).
 */
@FunctionalInterface
public interface CheckpointSink {
  /** Saves {@code snapshot} taken after {@code epochsDone} epochs; returns its folder. */
  Path save(int epochsDone, long globalStep, Checkpoints.Snapshot snapshot) throws IOException;
}
