package dev.ramtrain.jobs.train;

import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.offload.InferenceNetwork;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.offload.StreamedInference;
import java.util.List;
import java.util.Locale;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A trained run's model bound for inference, as {@code predict} and {@code evaluate} run it:
 * resident ({@link Model#buildForInference}) or, where its weights do not fit beside the
 * activations ({@code --offload auto}, or {@code on}), streamed from pinned host memory ({@link
 * StreamedInference}); a batch whose memory the backend does not have is a usage error in one line,
 * before anything is allocated where the plan sees it.
 */
final class InferenceModels {
  private static final Logger LOG = LoggerFactory.getLogger(InferenceModels.class);

  private InferenceModels() {}

  static InferenceNetwork build(
      TrainedCheckpoint trained, Backend backend, int batch, OffloadSpec offload, String command) {
    try {
      return plan(trained, backend, batch, offload, command);
    } catch (OutOfDeviceMemoryException e) { // the batch's memory, refused by plan or allocator
      throw new ConfigException(command + " --batch-size " + batch + ": " + e.getMessage());
    }
  }

  private static InferenceNetwork plan(
      TrainedCheckpoint trained, Backend backend, int batch, OffloadSpec offload, String command) {
    String spec = trained.model();
    Supplier<List<Layer>> layers = trained::layers;
    Model.InferenceFootprint resident = Model.inferenceFootprint(spec, layers, backend, batch);
    long free = backend.freeMemoryBytes();
    long budget = offload.budgetBytes() > 0 ? Math.min(offload.budgetBytes(), free) : free;
    boolean stream =
        switch (offload.mode()) {
          case OFF -> false;
          case ON -> true;
          case AUTO -> resident.totalBytes() > budget && !backend.sharesHostCores();
        };
    if (!stream) {
      require(resident.totalBytes(), budget, command, batch, trained, resident, "");
      return InferenceNetwork.resident(
          Model.buildForInference(spec, layers, backend, batch), backend);
    }
    int depth = offload.prefetchDepth();
    long streamed = StreamedInference.deviceBytes(resident, layers.get(), depth, backend);
    require(streamed, budget, command, batch, trained, resident, " with its weights streamed");
    LOG.info(
        "{}: {}'s weights streamed from host memory ({} pinned), {} of the device's for a"
            + " {}-slot weight ring, activations and workspace (ramtrain.offload.mode={})",
        command,
        spec,
        PlacementPlan.bytes(resident.parameterBytes()),
        PlacementPlan.bytes(streamed),
        depth,
        offload.mode().name().toLowerCase(Locale.ROOT));
    return new StreamedInference(spec, layers, depth, backend, batch);
  }

  /** Refuses a model needing {@code needed} bytes of a backend with {@code budget}, in one line. */
  private static void require(
      long needed,
      long budget,
      String command,
      int batch,
      TrainedCheckpoint trained,
      Model.InferenceFootprint f,
      String how) {
    if (needed > budget) {
      throw new ConfigException(
          String.format(
              "%s --batch-size %d: evaluating %s%s needs %s of the backend's memory (weights %s,"
                  + " activations %s, workspace %s), and it has %s free; use a smaller"
                  + " --batch-size",
              command,
              batch,
              trained.model(),
              how,
              PlacementPlan.bytes(needed),
              PlacementPlan.bytes(f.parameterBytes() + f.bufferBytes()),
              PlacementPlan.bytes(f.activationBytes()),
              PlacementPlan.bytes(f.workspaceBytes()),
              PlacementPlan.bytes(budget)));
    }
  }
}
