package dev.ramtrain.trainer.run;

import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.util.Map;

/**
 * What a run writes and goes on from, as its job decided: rank 0's {@code folder} (null on the
 * other ranks), the checkpoint it resumes from (null for a new run; already checked to be this
 * run's), what every checkpoint records beside the session's own entries (the job's settings and
 * build), and the steps between checkpoints within an epoch (0: at each epoch's end only).
 */
public record RunOutput(
    RunFolder folder,
    Checkpoints.Loaded resumeFrom,
    Map<String, Object> record,
    int checkpointEvery) {
  public RunOutput {
    record = Map.copyOf(record);
  }
}
