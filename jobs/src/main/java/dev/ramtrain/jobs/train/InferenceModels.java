package dev.ramtrain.jobs.train;

import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.offload.PlacementPlan;

/**
 * A trained run's model bound for inference ({@link Model#buildForInference}), as {@code predict}
 * and {@code evaluate} run it: a batch whose memory the backend does not have is a usage error in
 * one line, before anything is allocated where the plan sees it.
 */
final class InferenceModels {
  private InferenceModels() {}

  static Model build(TrainedCheckpoint trained, Backend backend, int batch, String command) {
    try {
      return buildChecked(trained, backend, batch, command);
    } catch (OutOfDeviceMemoryException e) { // the batch's memory, refused by plan or allocator
      throw new ConfigException(command + " --batch-size " + batch + ": " + e.getMessage());
    }
  }

  private static Model buildChecked(
      TrainedCheckpoint trained, Backend backend, int batch, String command) {
    return Model.buildForInference(
        trained.model(),
        trained::layers,
        backend,
        batch,
        footprint -> {
          long free = backend.freeMemoryBytes();
          if (footprint.totalBytes() > free) {
            throw new ConfigException(
                String.format(
                    "%s --batch-size %d: evaluating %s needs %s of the %s backend's memory"
                        + " (weights %s, activations %s, workspace %s), and it has %s free; use a"
                        + " smaller --batch-size",
                    command,
                    batch,
                    trained.model(),
                    PlacementPlan.bytes(footprint.totalBytes()),
                    backend.name(),
                    PlacementPlan.bytes(footprint.parameterBytes() + footprint.bufferBytes()),
                    PlacementPlan.bytes(footprint.activationBytes()),
                    PlacementPlan.bytes(footprint.workspaceBytes()),
                    PlacementPlan.bytes(free)));
          }
        });
  }
}
