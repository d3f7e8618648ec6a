package dev.ramtrain.jobs.train;

import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.offload.InferenceNetwork;
import dev.ramtrain.trainer.offload.InferencePlacement;
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
public final class InferenceModels {
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
    long budget = budget(backend, offload);
    InferencePlacement placement = placement(resident, layers.get(), backend, budget, offload);
    if (placement.streamed().isEmpty()) {
      require(resident.totalBytes(), budget, command, batch, trained, resident, "");
      return InferenceNetwork.resident(
          Model.buildForInference(spec, layers, backend, batch), backend);
    }
    int depth = offload.prefetchDepth();
    require(
        placement.deviceBytes(),
        budget,
        command,
        batch,
        trained,
        resident,
        " with its weights streamed");
    LOG.info(
        "{}: {} of {}'s weights streamed from host memory, {} kept on the device; {} of the"
            + " device's in all for them, a {}-slot weight ring, activations and workspace"
            + " (ramtrain.offload.mode={})",
        command,
        PlacementPlan.bytes(resident.parameterBytes() - placement.residentParameterBytes()),
        spec,
        PlacementPlan.bytes(placement.residentParameterBytes()),
        PlacementPlan.bytes(placement.deviceBytes()),
        depth,
        offload.mode().name().toLowerCase(Locale.ROOT));
    return new StreamedInference(spec, layers, placement.streamed(), depth, backend, batch);
  }

  /** The device memory inference may take on {@code backend}: its free memory, or the budget. */
  public static long budget(Backend backend, OffloadSpec offload) {
    long free = backend.freeMemoryBytes();
    return offload.budgetBytes() > 0 ? Math.min(offload.budgetBytes(), free) : free;
  }

  /**
   * Where the weights go ({@code ramtrain.offload.mode}): {@code off} on the device; {@code on}
   * streamed, the largest layers that fit {@code budget} kept on the device; {@code auto} on the
   * device where the model fits there beside its activations (and on a backend whose device is the
   * host's memory unless a budget is set), streamed as {@code on} otherwise.
   */
  public static InferencePlacement placement(
      Model.InferenceFootprint resident,
      List<Layer> layers,
      Backend backend,
      long budget,
      OffloadSpec offload) {
    boolean stream =
        switch (offload.mode()) {
          case OFF -> false;
          case ON -> true;
          // the cpu backend's "device" is the host's memory: streaming there only moves bytes,
          // unless a budget set for it asks
          case AUTO ->
              resident.totalBytes() > budget
                  && (!backend.sharesHostCores() || offload.budgetBytes() > 0);
        };
    return stream
        ? InferencePlacement.streamed(resident, layers, offload.prefetchDepth(), backend, budget)
        : InferencePlacement.resident(resident);
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
