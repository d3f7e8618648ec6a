package dev.ramtrain.trainer.run;

import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.checkpoint.CheckpointSink;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

/**
 * Where rank 0 of a run writes: its checkpoints, its metrics log, and the record each checkpoint
 * carries (a job's run directory, which also decides what a checkpoint commits).
 */
public interface RunFolder extends CheckpointSink {
  /** The folder on this machine. */
  Path path();

  /** The metrics log, kept up to the checkpoint a resumed run goes on from. */
  MetricsLog metrics() throws IOException;

  /** Adds {@code info} to what every checkpoint's state.json records from now on. */
  void recordInCheckpoints(Map<String, Object> info);
}
