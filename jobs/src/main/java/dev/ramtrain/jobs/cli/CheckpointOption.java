package dev.ramtrain.jobs.cli;

import dev.ramtrain.jobs.train.TrainedCheckpoint;
import java.io.IOException;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/** The {@code --checkpoint} option of the commands that serve a trained model. */
public final class CheckpointOption {
  @Option(
      names = {"-c", "--checkpoint"},
      required = true,
      paramLabel = "DIR",
      description = "A checkpoint folder, or a run directory (its latest checkpoint).")
  Path checkpoint;

  @Option(
      names = "--best",
      description =
          "With a run directory: its best checkpoint by the run's best-metric"
              + " (checkpoints/best), not the latest.")
  boolean best;

  TrainedCheckpoint open() throws IOException {
    return TrainedCheckpoint.open(checkpoint, best);
  }
}
