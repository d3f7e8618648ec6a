package dev.ramtrain.jobs.cli;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.jobs.config.DeviceProfiles;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.train.InferenceModels;
import dev.ramtrain.jobs.train.PlanSettings;
import dev.ramtrain.jobs.train.TrainSettings;
import dev.ramtrain.jobs.train.TrainedCheckpoint;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.engines.Backends;
import dev.ramtrain.trainer.dist.NodeExchange;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.offload.DeviceProfile;
import dev.ramtrain.trainer.offload.HostUpdateTiming;
import dev.ramtrain.trainer.offload.InferencePlacement;
import dev.ramtrain.trainer.offload.LayerCost;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.run.Placement;
import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.function.Supplier;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
    name = "plan",
    mixinStandardHelpOptions = true,
    header = "Plan a model's placement for a device memory budget.",
    description = {
      "Plan a model's placement for a device memory budget: resident or offloaded "
          + "(optimizer on the host, layers resident or streamed), device and pinned host "
          + "memory, bytes copied per step, predicted step time resident vs streamed, and the "
          + "batch from which copies hide behind compute. Layer memory is measured by binding "
          + "each layer on the CPU backend.",
      "Runs in this process, on the driver: --master does not distribute it."
    })
public final class PlanCommand implements Callable<Integer> {
  @Mixin CommonFlags common;

  @Option(names = "--model", description = "Model spec (ramtrain.train.model).")
  String model;

  @Option(names = "--batch-size", description = "Batch size (ramtrain.train.batch-size).")
  Integer batchSize;

  @Option(
      names = "--image",
      paramLabel = "HxWxC",
      defaultValue = "32x32x3",
      description = "Input images, for cnn and resnet specs (default ${DEFAULT-VALUE}).")
  String image;

  @Option(
      names = "--device",
      description = "A profile under ramtrain.devices, or measured (ramtrain.plan.device).")
  String device;

  @Option(
      names = "--budget",
      description = "Device memory budget, e.g. 6GiB (ramtrain.offload.budget).")
  String budget;

  @Option(
      names = "--prefetch-depth",
      description = "Weight slots (ramtrain.offload.prefetch-depth).")
  Integer prefetchDepth;

  @Option(
      names = "--bf16-weights",
      description = "bf16 device weights (ramtrain.offload.bf16-weights).")
  Boolean bf16;

  @Option(
      names = "--clip-norm",
      description =
          "Clip gradients at this norm (ramtrain.train.clip-norm): the host update then runs"
              + " speculatively or after backward (ramtrain.offload.clip-update).")
  Double clipNorm;

  @Option(
      names = "--delayed-update",
      description = "The host update one step stale (ramtrain.offload.delayed-update).")
  Boolean delayedUpdate;

  @Option(
      names = "--devices",
      defaultValue = "1",
      description =
          "Devices of a node sharing one host copy (ramtrain.dist.devices-per-node): the node's"
              + " host memory and step (default ${DEFAULT-VALUE}).")
  int devices;

  @Option(
      names = {"-c", "--checkpoint"},
      paramLabel = "RUN",
      description =
          "Plan a trained run's model (a run directory or checkpoint folder): its spec, image"
              + " shape and precision as it trained, instead of --model and --image.")
  Path checkpoint;

  @Option(
      names = "--inference",
      description =
          "Plan predict and evaluate instead of training: the model bound for inference (no"
              + " gradients or optimizer state, each activation's memory reused once read), at"
              + " --batch-size or predict's default of "
              + EvaluateCommand.DEFAULT_BATCH
              + ".")
  boolean inference;

  @Override
  public Integer call() throws IOException {
    if (devices < 1) {
      throw new ConfigException("--devices must be >= 1, got " + devices);
    }
    Map<String, String> f = new LinkedHashMap<>();
    f.put("ramtrain.train.model", model);
    f.put("ramtrain.train.batch-size", CommonFlags.text(batchSize));
    f.put("ramtrain.plan.device", device);
    f.put("ramtrain.offload.budget", budget);
    f.put("ramtrain.offload.prefetch-depth", CommonFlags.text(prefetchDepth));
    f.put("ramtrain.offload.bf16-weights", CommonFlags.text(bf16));
    f.put("ramtrain.train.clip-norm", CommonFlags.text(clipNorm));
    f.put("ramtrain.offload.delayed-update", CommonFlags.text(delayedUpdate));
    RamtrainConfig c = common.load(f);
    OffloadSpec offload = TrainSettings.offload(c);
    int batch =
        inference && batchSize == null ? EvaluateCommand.DEFAULT_BATCH : TrainSettings.batchSize(c);
    String spec;
    ImageShape shape;
    Supplier<List<Layer>> layers;
    if (checkpoint != null) {
      if (model != null) {
        throw new ConfigException("--checkpoint plans the run's own model: give it or --model");
      }
      TrainedCheckpoint trained = TrainedCheckpoint.open(checkpoint);
      spec = trained.model();
      shape = trained.shape();
      layers = trained::layers;
      layers.get(); // a model the checkpoint cannot build fails here, exit 2
    } else {
      spec = c.string("ramtrain.train.model");
      shape = TrainSettings.planImage("--image", image);
      layers = TrainSettings.modelLayers(c, shape);
    }
    try (Backend backend = Backends.open(TrainSettings.backend(c))) {
      if (inference) {
        System.out.print(inferencePlan(spec, shape, layers, backend, batch, offload));
        return 0;
      }
      String deviceName = c.string("ramtrain.plan.device");
      DeviceProfile profile =
          deviceName.equals("measured")
              ? DeviceProfile.measure(
                  backend, "measured (" + backend.name() + " backend)", backend.freeMemoryBytes())
              : DeviceProfiles.named(c, deviceName);
      long budgetBytes = Placement.budget(offload, profile.memoryBytes());
      List<LayerCost> costs = LayerCost.measure(layers, backend);
      if (deviceName.equals("measured")) { // this machine: predict from what its backend takes
        costs =
            LayerCost.timed(
                costs, layers, backend, batch, offload.hostThreads(), offload.optimizerState());
      }
      PlacementPlan.Zero zero = zero(c);
      HostUpdateTiming timing =
          PlanSettings.timing(
              c, offload, zero != PlacementPlan.Zero.NONE, profile.sharesHostCores());
      PlacementPlan plan =
          Placement.plan(
              offload,
              costs,
              batch,
              budgetBytes,
              profile,
              zero,
              PlanSettings.host(c, backend, offload),
              timing);
      System.out.print(plan.render(spec + " on " + shape + " images", profile, budgetBytes));
      if (devices > 1) {
        System.out.print(
            plan.renderNode(costs, devices, 1, NodeExchange.addBytesPerSecond(1 << 22)));
      }
      if (plan.mode() == PlacementPlan.Mode.OFFLOADED) {
        System.out.printf(
            "resident needs %s at this batch%n",
            PlacementPlan.bytes(PlacementPlan.residentBytes(costs, batch)));
      }
    }
    return 0;
  }

  /**
   * ZeRO as {@code ramtrain.dist.zero} and {@code .ranks} set it, over the nodes of {@code
   * --devices} that share one host copy each (a rank's own where a node is one device).
   */
  private PlacementPlan.Zero zero(RamtrainConfig c) {
    TrainSettings.Dist dist = TrainSettings.dist(c);
    if (dist.zero() == 0) {
      return PlacementPlan.Zero.NONE;
    }
    if (dist.ranks() % devices != 0) {
      throw new ConfigException(
          String.format(
              "--devices %d does not divide ramtrain.dist.ranks = %d", devices, dist.ranks()));
    }
    return new PlacementPlan.Zero(dist.ranks() / devices, dist.zero() == 2);
  }

  /**
   * What predict and evaluate allocate for the model at {@code batch}, to the byte: bound for
   * inference, and, where its weights do not fit the budget beside the activations (or {@code
   * ramtrain.offload.mode=on}), streamed with the largest layers that fit kept on the device.
   */
  private static String inferencePlan(
      String spec,
      ImageShape shape,
      Supplier<List<Layer>> layers,
      Backend backend,
      int batch,
      OffloadSpec offload) {
    Model.InferenceFootprint f = Model.inferenceFootprint(spec, layers, backend, batch);
    long budget = InferenceModels.budget(backend, offload);
    List<Layer> built = layers.get();
    InferencePlacement placement = InferenceModels.placement(f, built, backend, budget, offload);
    StringBuilder out =
        new StringBuilder(
            String.format(
                "inference      %s on %s images, batch %d, on the %s backend%n"
                    + "weights        %s (and %s of buffers: running statistics)%n"
                    + "activations    %s (reused once read: no gradients, nothing kept for"
                    + " backward)%n"
                    + "workspace      %s%n"
                    + "total          %s%s%n",
                spec,
                shape,
                batch,
                backend.name(),
                PlacementPlan.bytes(f.parameterBytes()),
                PlacementPlan.bytes(f.bufferBytes()),
                PlacementPlan.bytes(f.activationBytes()),
                PlacementPlan.bytes(f.workspaceBytes()),
                PlacementPlan.bytes(f.totalBytes()),
                fits(f.totalBytes(), budget, placement.streamed().isEmpty())));
    if (!placement.streamed().isEmpty()) {
      long withWeights = built.stream().filter(l -> !l.parameters().isEmpty()).count();
      out.append(
          String.format(
              "streamed       %d of %d layers' weights (%s) from pinned host memory through a"
                  + " %d-slot ring; %s of weights kept on the device (the largest layers that"
                  + " fit)%n"
                  + "device         %s in all%s%n",
              placement.streamed().size(),
              withWeights,
              PlacementPlan.bytes(f.parameterBytes() - placement.residentParameterBytes()),
              offload.prefetchDepth(),
              PlacementPlan.bytes(placement.residentParameterBytes()),
              PlacementPlan.bytes(placement.deviceBytes()),
              fits(placement.deviceBytes(), budget, true)));
    }
    return out.toString();
  }

  /** ", fits in X free", or what to do; nothing where the backend has no limit. */
  private static String fits(long bytes, long budget, boolean last) {
    if (budget == Long.MAX_VALUE) {
      return "";
    }
    if (bytes <= budget) {
      return ", fits in " + PlacementPlan.bytes(budget);
    }
    return last
        ? ", more than the " + PlacementPlan.bytes(budget) + ": use a smaller --batch-size"
        : ", more than the " + PlacementPlan.bytes(budget);
  }
}
