package dev.ramtrain.trainer.run;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.LoopSpec;
import dev.ramtrain.trainer.ResidentLearner;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostMemory;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.dist.NodeExchange;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.offload.DeviceGroup;
import dev.ramtrain.trainer.offload.DeviceProfile;
import dev.ramtrain.trainer.offload.HostProfile;
import dev.ramtrain.trainer.offload.HostUpdateTiming;
import dev.ramtrain.trainer.offload.LayerCost;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.offload.OffloadedLearner;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.offload.Streaming;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.Optimizer;
import dev.ramtrain.trainer.optim.OptimizerSpec;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Where a training run's weights live: plans the model for the device budget ({@code
 * ramtrain.offload.*}), prints the plan, and builds a resident or offloaded learner. The one
 * placement that {@code train}, {@code pipeline}, {@code plan} and the notebook API print and
 * follow.
 */
public final class Placement {
  private Placement() {}

  /**
   * The learner of {@code run} for inputs of {@code shape}: its model at the run's batch size with
   * its optimizer, placed as its offload settings say, one rank of {@code ranks}; {@code loop}'s
   * clip norm (0: none) and gradient accumulation ({@code loop} is the run's, its normalization
   * filled in). A model that cannot be placed, or settings that cannot work together, are a {@link
   * ConfigException} naming the key, before anything is allocated.
   */
  public static Learner learner(
      RunSpec run,
      ImageShape shape,
      LoopSpec loop,
      Backend backend,
      Stream setup,
      DataParallel ranks,
      HostLimit hostLimit) {
    return learner(run, shape, loop, backend, setup, ranks, hostLimit, null);
  }

  /**
   * As above, as a device of {@code node} (null: its node's only device), whose devices share one
   * host copy when offloaded: device 0 holds it, the others only their landing slots.
   */
  public static Learner learner(
      RunSpec run,
      ImageShape shape,
      LoopSpec loop,
      Backend backend,
      Stream setup,
      DataParallel ranks,
      HostLimit hostLimit,
      DeviceGroup node) {
    return learner(
        run.model().blueprint(shape, run.batchSize()),
        run.optimizer(),
        run.offload(),
        loop,
        backend,
        setup,
        ranks,
        hostLimit,
        node);
  }

  private static Learner learner(
      ModelBlueprint model,
      OptimizerSpec optimizer,
      OffloadSpec offload,
      LoopSpec loop,
      Backend backend,
      Stream setup,
      DataParallel ranks,
      HostLimit hostLimit,
      DeviceGroup node) {
    float clipNorm = loop.clipNorm();
    boolean bf16State = offload.optimizerState() == OffloadSpec.OptimizerState.BF16;
    if (bf16State && !(optimizer instanceof AdamWSpec)) {
      throw new ConfigException(
          "ramtrain.offload.optimizer-state = bf16: only AdamW keeps bf16 state; use fp32 with"
              + " SGD");
    }
    if (offload.mode() == OffloadSpec.Mode.OFF) {
      return resident(model, optimizer, clipNorm, backend, setup, ranks);
    }
    long free = backend.freeMemoryBytes();
    // The CPU backend's device memory is the host's: within the rank's limit.
    boolean limited = backend.sharesHostCores() && hostLimit.binds(free);
    free = limited ? hostLimit.cap(free) : free;
    long budget;
    try {
      // Within an executor's memory beside its heap (384 MiB by Spark's default), a GPU's margin
      // would leave nothing: a quarter of it at most stays for the JVM's own native memory there.
      budget = budget(limited ? withMarginAtMost(offload, free / 4) : offload, free);
    } catch (ConfigException e) {
      if (!limited) {
        throw e;
      }
      throw new ConfigException(
          e.getMessage()
              + " (the CPU backend's device memory is this rank's host memory: "
              + hostLimit.source()
              + "; raise it)");
    }
    List<LayerCost> costs = LayerCost.measure(model.layers(), backend);
    // Placement depends on memory only; the copy and GEMM rates, which take a second to measure,
    // only feed the printed predictions of an offloaded run.
    // ZeRO: a resident rank's device holds its share of the optimizer state.
    PlacementPlan.Zero zero = zero(ranks);
    PlacementPlan plan =
        plan(
            offload,
            costs,
            model.maxBatch(),
            budget,
            DeviceProfile.unmeasured(backend, free),
            zero);
    if (ranks.devicesPerNode() > 1) {
      // A node's devices share device 0's host copy only if all of them offload: they must agree.
      ranks.requireSame(plan.mode().name().getBytes(StandardCharsets.US_ASCII), "placement");
    }
    long residentBytes = PlacementPlan.residentBytes(costs, model.maxBatch(), zero.shares());
    if (plan.mode() == PlacementPlan.Mode.OFFLOADED
        && backend.sharesHostCores()
        && offload.mode() == OffloadSpec.Mode.AUTO
        && offload.budgetBytes() == 0
        && residentBytes > budget) {
      // The cpu backend's "device" is the host: offloading would only add host copies to it.
      throw new ConfigException(
          String.format(
              "ramtrain.train.batch-size = %d: training resident at this batch needs %s of the cpu"
                  + " backend's memory, and it has %s (%s); use a smaller --batch-size",
              model.maxBatch(),
              PlacementPlan.bytes(residentBytes),
              PlacementPlan.bytes(budget),
              limited
                  ? "this rank may take " + hostLimit.source()
                  : "ramtrain.cpu.memory, printed at start"));
    }
    long parameters = costs.stream().mapToLong(LayerCost::parameters).sum();
    if (plan.mode() == PlacementPlan.Mode.OFFLOADED
        && offload.mode() == OffloadSpec.Mode.AUTO
        && residentBytes <= budget
        && ranks.leader()) {
      System.out.printf(
          "placement: offloaded: resident, the parameters would be one allocation of %s, and the"
              + " %s backend's largest is %s%n",
          PlacementPlan.bytes(4 * parameters),
          backend.name(),
          PlacementPlan.bytes(backend.largestAllocationBytes()));
    }
    if (plan.mode() == PlacementPlan.Mode.RESIDENT
        && ranks.partitionsOptimizerState()
        && ranks.devicesPerNode() > 1) {
      throw new ConfigException(
          "ramtrain.dist.zero: with "
              + ranks.devicesPerNode()
              + " devices a node ZeRO partitions the nodes' one host copy each, and this run"
              + " places the model resident on every device; use ramtrain.offload.mode = on, or"
              + " ramtrain.dist.devices-per-node = 1");
    }
    if (plan.mode() == PlacementPlan.Mode.RESIDENT) {
      backend.reserve(plan.deviceBytes()); // the run's device memory in one allocation
      backend.resetPeakAllocatedBytes();
      // The CPU backend's "device" is host memory: say so instead of naming a device budget.
      String budgetText =
          backend.sharesHostCores()
              ? PlacementPlan.bytes(budget) + " of host memory (the cpu backend's device)"
              : "a " + PlacementPlan.bytes(budget) + " device budget";
      if (ranks.leader()) { // rank 0 speaks for the ranks
        System.out.printf(
            "placement: resident (%s of %s; ramtrain.offload.mode=auto)%n",
            PlacementPlan.bytes(plan.deviceBytes()), budgetText);
      }
      if (bf16State && ranks.leader()) {
        System.out.println(
            "optimizer state: fp32 on the device (ramtrain.offload.optimizer-state = bf16 is the"
                + " host optimizer's, and this run is resident)");
      }
      return resident(model, optimizer, clipNorm, backend, setup, ranks);
    }
    long publishedBytes = offload.delayedUpdate() ? 4 * parameters : 0;
    long pinned = plan.hostPinnedBytes() + publishedBytes; // memory alone: as the measured plan's
    long machine = HostMemory.availableBytes();
    long host = hostLimit.cap(machine);
    boolean speculative =
        speculativeClip(
            offload,
            clipNorm,
            ranks,
            optimizer,
            parameters,
            pinned,
            host,
            backend.sharesHostCores());
    if (speculative) {
      pinned += keptBytes(optimizer, offload, parameters);
    }
    if (pinned > host) { // pinned memory cannot be paged out: fail now, not midway through setup
      throw new ConfigException(
          String.format(
              "ramtrain.offload: an offloaded run keeps every parameter's weights, gradients and"
                  + " optimizer state in pinned host memory, %s here%s, and %s; %s",
              PlacementPlan.bytes(pinned),
              speculative
                  ? " (ramtrain.offload.clip-update=serial saves "
                      + PlacementPlan.bytes(keptBytes(optimizer, offload, parameters))
                      + ")"
                  : "",
              hostLimit.binds(machine)
                  ? "this rank may take " + hostLimit.source()
                  : "the host has " + PlacementPlan.bytes(host) + " available",
              hostLimit.binds(machine)
                  ? "raise it, or use a smaller model"
                  : "use a host with more memory or a smaller model"));
    }
    DeviceProfile profile =
        DeviceProfile.measure(backend, backend.name() + " backend (measured)", free);
    costs =
        LayerCost.timed(
            costs,
            model.layers(),
            backend,
            model.maxBatch(),
            offload.hostThreads(),
            offload.optimizerState());
    HostProfile hostProfile = HostProfile.measure(backend, offload.hostThreads(), pinned);
    HostUpdateTiming timing = HostUpdateTiming.of(offload.delayedUpdate(), clipNorm, speculative);
    plan = plan(offload, costs, model.maxBatch(), budget, profile, zero, hostProfile, timing);
    if (ranks.leader()) {
      System.out.print(plan.render(model.spec(), profile, budget));
      if (ranks.devicesPerNode() > 1 && node != null) {
        System.out.print(
            plan.renderNode(
                costs,
                ranks.devicesPerNode(),
                ranks.nodes(),
                NodeExchange.addBytesPerSecond(1 << 22)));
      }
    }
    if (loop.accumulate() > 1) {
      throw new ConfigException(
          String.format(
              "ramtrain.train.accumulate = %d: gradient accumulation needs the model resident on"
                  + " the device, and this one is offloaded (ramtrain.offload.mode); use a smaller"
                  + " batch that fits without accumulation, or accumulate = 1",
              loop.accumulate()));
    }
    if (offload.delayedUpdate()) {
      if (ranks.leader()) {
        System.out.printf(
            "delayed update on: %s more pinned host memory for the published weights%n",
            PlacementPlan.bytes(publishedBytes));
      }
    }
    backend.reserve(plan.deviceBytes());
    backend.resetPeakAllocatedBytes(); // the run's peak, not the profiling's
    return OffloadedLearner.build(
        model,
        Streaming.of(plan, offload.delayedUpdate(), offload.delayWarmupSteps()),
        OffloadedLearner.OptimizerFactory.of(
            optimizer, backend, offload.optimizerState(), model.seed()),
        offload.hostThreads(),
        clipNorm,
        speculative,
        backend,
        setup,
        ranks,
        node);
  }

  /**
   * When {@code plan} counts a run's host update: as {@link #speculativeClip} decides at the start
   * of a run, assuming the speculative update's kept copy fits the host ({@code partitions}: ZeRO
   * shares the optimizer state, whose steps update after the whole gradient).
   */
  public static HostUpdateTiming plannedTiming(
      OffloadSpec offload, float clipNorm, boolean partitions, boolean sharesHostCores) {
    boolean speculative = !partitions && speculates(offload, true, sharesHostCores);
    return HostUpdateTiming.of(offload.delayedUpdate(), clipNorm, speculative);
  }

  /**
   * {@code ramtrain.offload.clip-update}'s rule: asked for, or {@code auto} where the kept copy
   * {@code fits} the host and the device computes beside the host's cores.
   */
  private static boolean speculates(OffloadSpec offload, boolean fits, boolean sharesHostCores) {
    return switch (offload.clipUpdate()) {
      case SERIAL -> false;
      case SPECULATIVE -> true;
      case AUTO -> fits && !sharesHostCores;
    };
  }

  /**
   * Whether a clipped step's host update speculates ({@code ramtrain.offload.clip-update}): asked
   * for, or {@code auto} where its kept copy fits beside the {@code pinned} bytes the host has room
   * for and the device computes beside the host's cores (on the cpu backend the speculative update
   * and its copies take the cores backward computes on: 2 cores ran a clipped MLP step 1.1-1.3x
   * slower that way, benchmarks/RESULTS.md); never without clipping, with the delayed update or
   * with ZeRO-1, whose steps update after the whole gradient anyway.
   */
  private static boolean speculativeClip(
      OffloadSpec offload,
      float clipNorm,
      DataParallel ranks,
      OptimizerSpec optimizer,
      long parameters,
      long pinned,
      long host,
      boolean sharesHostCores) {
    if (clipNorm <= 0 || offload.delayedUpdate() || ranks.partitionsOptimizerState()) {
      return false;
    }
    long kept = keptBytes(optimizer, offload, parameters);
    boolean speculate = speculates(offload, pinned + kept <= host, sharesHostCores);
    if (ranks.leader()) {
      String why =
          speculate
              ? "speculative, as gradients land (%s more pinned host memory for the kept state)"
              : offload.clipUpdate() == OffloadSpec.ClipUpdate.SERIAL
                  ? "serial, after backward (the speculative update would keep %s)"
                  : sharesHostCores
                      ? "serial, after backward (the device computes on the host's cores, which a"
                          + " speculative update and its %s of kept state would take)"
                      : "serial, after backward (the speculative update's %s of kept state would"
                          + " not fit)";
      System.out.printf(
          "clipped updates: " + why + "; ramtrain.offload.clip-update%n",
          PlacementPlan.bytes(kept));
    }
    return speculate;
  }

  /** What a speculative update keeps: the masters and each optimizer state slab. */
  private static long keptBytes(OptimizerSpec optimizer, OffloadSpec offload, long parameters) {
    int width = offload.optimizerState().bytesPerValue();
    return parameters * (4 + (long) width * optimizer.stateSlabs().size());
  }

  /**
   * The device budget for a device with {@code free} bytes; a margin too large is a usage error.
   */
  public static long budget(OffloadSpec offload, long free) {
    try {
      return offload.budget(free);
    } catch (IllegalArgumentException e) {
      throw new ConfigException("ramtrain.offload.margin: " + e.getMessage());
    }
  }

  private static OffloadSpec withMarginAtMost(OffloadSpec o, long margin) {
    return new OffloadSpec(
        o.mode(),
        o.budgetBytes(),
        Math.min(o.marginBytes(), margin),
        o.prefetchDepth(),
        o.bf16Weights(),
        o.delayedUpdate(),
        o.delayWarmupSteps(),
        o.hostThreads(),
        o.clipUpdate(),
        o.optimizerState());
  }

  /**
   * Where layers of {@code costs} go at {@code batch} within {@code budget} on {@code profile}, as
   * {@code ramtrain.offload.*} asks ({@code mode = on} offloads even what would fit): the one
   * placement that {@code train}, {@code plan} and the notebook API print and follow. A budget too
   * small for the model is a usage error naming the key.
   */
  public static PlacementPlan plan(
      OffloadSpec offload, List<LayerCost> costs, int batch, long budget, DeviceProfile profile) {
    return plan(offload, costs, batch, budget, profile, PlacementPlan.Zero.NONE);
  }

  /**
   * ZeRO as {@code ranks} partition: over the nodes (a rank's own where a node is one device), the
   * gradients too at stage 2; {@link PlacementPlan.Zero#NONE} without.
   */
  public static PlacementPlan.Zero zero(DataParallel ranks) {
    return ranks.partitionsOptimizerState()
        ? new PlacementPlan.Zero(ranks.nodes(), ranks.partitionsGradients())
        : PlacementPlan.Zero.NONE;
  }

  /** As above, the state (and gradients) split as ZeRO's {@code zero} says. */
  public static PlacementPlan plan(
      OffloadSpec offload,
      List<LayerCost> costs,
      int batch,
      long budget,
      DeviceProfile profile,
      PlacementPlan.Zero zero) {
    return plan(
        offload,
        costs,
        batch,
        budget,
        profile,
        zero,
        HostProfile.UNMEASURED,
        HostUpdateTiming.AS_GRADIENTS_LAND);
  }

  /**
   * As above, the host update counted on {@code host} as {@code timing} runs it ({@link
   * PlacementPlan}'s predictions alone depend on them).
   */
  public static PlacementPlan plan(
      OffloadSpec offload,
      List<LayerCost> costs,
      int batch,
      long budget,
      DeviceProfile profile,
      PlacementPlan.Zero zero,
      HostProfile host,
      HostUpdateTiming timing) {
    try {
      return PlacementPlan.plan(
          costs,
          batch,
          budget,
          offload.prefetchDepth(),
          offload.bf16Weights(),
          profile,
          offload.mode() == OffloadSpec.Mode.ON,
          2 * offload.optimizerState().bytesPerValue(),
          zero,
          host,
          timing);
    } catch (IllegalArgumentException e) {
      throw new ConfigException("ramtrain.offload.budget: " + e.getMessage());
    }
  }

  /**
   * A resident model keeps its parameters in one allocation (and its gradients and moments in one
   * each); the cpu backend's largest is 2 GiB, which ViT-H/14's 632 M parameters pass.
   */
  private static void requireOneAllocation(ModelBlueprint config, Backend backend) {
    long parameters =
        config.layers().get().stream()
            .flatMap(l -> l.parameters().stream())
            .mapToLong(ParamSpec::count)
            .sum();
    if (4 * parameters > backend.largestAllocationBytes()) {
      throw new ConfigException(
          String.format(
              "ramtrain.offload.mode = off: a resident model keeps its parameters in one"
                  + " allocation, %s for %s's %,d, and the %s backend's largest is %s; use"
                  + " ramtrain.offload.mode = on (the host keeps them, the device a part under"
                  + " the limit)",
              PlacementPlan.bytes(4 * parameters),
              config.spec(),
              parameters,
              backend.name(),
              PlacementPlan.bytes(backend.largestAllocationBytes())));
    }
  }

  private static Learner resident(
      ModelBlueprint config,
      OptimizerSpec optimizer,
      float clipNorm,
      Backend backend,
      Stream setup,
      DataParallel ranks) {
    requireOneAllocation(config, backend);
    Model model = config.buildResident(backend, setup);
    try {
      // ZeRO: the device holds optimizer state for this rank's share only.
      long[] share = ranks.share(model.parameters().count());
      Optimizer opt =
          ranks.partitionsOptimizerState()
              ? optimizer.onDevice(backend, model.parameters(), share[0], share[1])
              : optimizer.onDevice(backend, model.parameters());
      return new ResidentLearner(backend, model, opt, clipNorm, ranks);
    } catch (RuntimeException e) {
      model.close();
      throw e;
    }
  }
}
