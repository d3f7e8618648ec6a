package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.ByteSize;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Where a model's layers live for a device memory budget, and what that costs. If parameters,
 * gradients, AdamW's two moments and the activations all fit, everything stays resident (the
 * engine's plain mode). Otherwise master weights, gradients and optimizer state move to pinned host
 * memory and the device keeps: the largest layers that still fit (weights and gradients, each one
 * allocation within the device's largest: the cpu backend's 2 GiB), a ring of {@code prefetchDepth}
 * weight slots for the streamed ones, two gradient slots for their device-to-host copies, and the
 * activations (only block inputs with activation checkpointing, when the full activations do not
 * fit).
 *
 * <p>Predictions: compute time is each layer's measured time on the backend ({@link
 * LayerCost#timed}), or FLOPs over the profile's rate for a layer not measured (a named device
 * profile); a resident step adds the device optimizer's measured time, an offloaded one the part of
 * the host optimizer's that nothing hides ({@link HostUpdateCost}: by when it runs, and with the
 * copies sharing the host's memory bandwidth; all of it where the device is the host's own cores).
 * Offloaded, every gradient crosses back once a step and every resident layer's updated weights
 * once in; a streamed layer's weights cross twice (forward, and again for backward unless the ring
 * still holds them). A streamed step takes the longer of compute and copies plus the first copy,
 * which nothing hides.
 */
public record PlacementPlan(
    Mode mode,
    int batch,
    int prefetchDepth,
    boolean bf16Weights,
    boolean activationCheckpointing,
    List<String> resident,
    List<String> streamed,
    long deviceBytes,
    long hostPinnedBytes,
    long copiedBytesPerStep,
    double computeSeconds,
    double copySeconds,
    double residentStepSeconds,
    double streamedStepSeconds,
    int minBatchToHideCopies,
    HostProfile host,
    HostUpdateTiming hostUpdate,
    double hostSeconds,
    double exposedHostSeconds) {

  /**
   * RESIDENT: weights, gradients and optimizer state on the device. OFFLOADED: masters, gradients
   * and optimizer state in pinned host memory, the optimizer step on the host, weights resident or
   * streamed layer by layer (possibly none streamed: optimizer offload alone).
   */
  public enum Mode {
    RESIDENT,
    OFFLOADED
  }

  /** Bytes of AdamW state per parameter: two fp32 moments. */
  static final int OPTIMIZER_BYTES_PER_PARAMETER = 8;

  /**
   * Plans {@code layers} at {@code batch} for {@code budgetBytes} of device memory; throws when
   * even one layer does not fit, naming it and what it needs.
   */
  public static PlacementPlan plan(
      List<LayerCost> layers,
      int batch,
      long budgetBytes,
      int prefetchDepth,
      boolean bf16Weights,
      DeviceProfile profile) {
    return plan(layers, batch, budgetBytes, prefetchDepth, bf16Weights, profile, false);
  }

  /**
   * As {@link #plan(List, int, long, int, boolean, DeviceProfile)}; {@code offload} plans an
   * offloaded run even when everything would fit resident (then no layer streams: the optimizer
   * alone moves to the host).
   */
  public static PlacementPlan plan(
      List<LayerCost> layers,
      int batch,
      long budgetBytes,
      int prefetchDepth,
      boolean bf16Weights,
      DeviceProfile profile,
      boolean offload) {
    return plan(
        layers,
        batch,
        budgetBytes,
        prefetchDepth,
        bf16Weights,
        profile,
        offload,
        OPTIMIZER_BYTES_PER_PARAMETER);
  }

  /**
   * As above, the host optimizer keeping {@code optimizerStateBytes} of state a parameter (AdamW: 8
   * with fp32 moments, 4 with bf16 ones).
   */
  public static PlacementPlan plan(
      List<LayerCost> layers,
      int batch,
      long budgetBytes,
      int prefetchDepth,
      boolean bf16Weights,
      DeviceProfile profile,
      boolean offload,
      int optimizerStateBytes) {
    return plan(
        layers,
        batch,
        budgetBytes,
        prefetchDepth,
        bf16Weights,
        profile,
        offload,
        optimizerStateBytes,
        Zero.NONE);
  }

  /**
   * ZeRO's partition as the plan sees it: {@code shares} owners (ranks, or nodes whose devices
   * share one host copy) each keeping the optimizer state of its share, and with {@code gradients}
   * (stage 2) only its share of the reduced gradients too.
   */
  public record Zero(int shares, boolean gradients) {
    public static final Zero NONE = new Zero(1, false);

    public Zero {
      if (shares < 1) {
        throw new IllegalArgumentException("ZeRO shares must be >= 1, got " + shares);
      }
    }

    /** The largest share of {@code n} parameters, which one owner holds at most. */
    long largestShare(long n) {
      return (n + shares - 1) / shares;
    }
  }

  /**
   * As above, under ZeRO's {@code zero}: resident, the device holds its owner's share of the
   * optimizer state; offloaded, the pinned host copy holds the share's state (and, stage 2, the
   * share's gradients beside two landing slots of the largest layer).
   */
  public static PlacementPlan plan(
      List<LayerCost> layers,
      int batch,
      long budgetBytes,
      int prefetchDepth,
      boolean bf16Weights,
      DeviceProfile profile,
      boolean offload,
      int optimizerStateBytes,
      Zero zero) {
    return plan(
        layers,
        batch,
        budgetBytes,
        prefetchDepth,
        bf16Weights,
        profile,
        offload,
        optimizerStateBytes,
        zero,
        HostProfile.UNMEASURED,
        HostUpdateTiming.AS_GRADIENTS_LAND);
  }

  /**
   * As above, on {@code host}, whose memory the host update and the copies share, with the host
   * update run as {@code timing} says ({@link HostUpdateCost}).
   */
  public static PlacementPlan plan(
      List<LayerCost> layers,
      int batch,
      long budgetBytes,
      int prefetchDepth,
      boolean bf16Weights,
      DeviceProfile profile,
      boolean offload,
      int optimizerStateBytes,
      Zero zero,
      HostProfile host,
      HostUpdateTiming timing) {
    if (batch < 1 || prefetchDepth < 1 || budgetBytes <= 0) {
      throw new IllegalArgumentException(
          "batch, prefetch depth and budget must be positive: "
              + batch
              + ", "
              + prefetchDepth
              + ", "
              + budgetBytes);
    }
    long params = layers.stream().mapToLong(LayerCost::parameters).sum();
    long activations = activationBytes(layers, batch);
    // Measured layers take their measured time per sample; the others FLOPs over the profile's
    // rate.
    double compute =
        layers.stream()
            .mapToDouble(
                l ->
                    l.measured()
                        ? l.secondsPerSample() * batch
                        : l.flopsPerSample() * (double) batch / profile.flopsPerSecond())
            .sum();
    // A resident step also runs the optimizer over every parameter on the device; offloaded, the
    // host runs it layer by layer behind backward (not modelled).
    double residentStep = compute + layers.stream().mapToDouble(LayerCost::updateSeconds).sum();
    long residentBytes = residentBytes(layers, batch, zero.shares());
    // Layers without weights (activations, pooling) have nothing to place.
    List<String> names =
        layers.stream().filter(l -> l.parameters() > 0).map(LayerCost::name).toList();
    // A resident model's parameters, gradients and moments are one allocation each: where the
    // device's largest cannot hold them (the cpu backend's 2 GiB), the host keeps them.
    long largestAllocation = profile.largestAllocationBytes();
    if (residentBytes <= budgetBytes && !offload && 4 * params <= largestAllocation) {
      return new PlacementPlan(
          Mode.RESIDENT,
          batch,
          0,
          false,
          false,
          names,
          List.of(),
          residentBytes,
          0,
          0,
          compute,
          0,
          residentStep,
          residentStep,
          1,
          host,
          timing,
          0,
          0);
    }
    long deviceWeightBytesPerParam = bf16Weights ? 2 : 4;
    boolean checkpointing = false;
    long activationsOnDevice = activations;
    // Streaming everything must fit at least: one layer's slots plus the activations.
    long floor = streamingFloor(layers, prefetchDepth, deviceWeightBytesPerParam) + activations;
    if (floor > budgetBytes && checkpointedActivations(layers, batch) < activations) {
      checkpointing = true;
      activationsOnDevice = checkpointedActivations(layers, batch);
      floor =
          streamingFloor(layers, prefetchDepth, deviceWeightBytesPerParam) + activationsOnDevice;
    }
    if (floor > budgetBytes) {
      throw new IllegalArgumentException(
          refusal(layers, batch, budgetBytes, prefetchDepth, bf16Weights, floor, checkpointing));
    }
    // Keep the largest layers resident while the rest still fit: the most bytes never cross the
    // bus.
    List<LayerCost> bySize = new ArrayList<>(layers);
    bySize.sort(Comparator.comparingLong(LayerCost::parameters).reversed());
    List<LayerCost> streamed = new ArrayList<>(layers);
    streamed.removeIf(l -> l.parameters() == 0);
    long residentWeights = 0; // weights and gradients, 8 bytes a parameter
    for (LayerCost candidate : bySize) {
      List<LayerCost> rest = new ArrayList<>(streamed);
      rest.remove(candidate);
      long need =
          residentWeights
              + 8 * candidate.parameters()
              + streamingFloor(rest, prefetchDepth, deviceWeightBytesPerParam)
              + activationsOnDevice;
      // The resident layers' weights are one allocation (and their gradients another).
      boolean oneAllocation = residentWeights / 2 + 4 * candidate.parameters() <= largestAllocation;
      if (need <= budgetBytes && oneAllocation) {
        streamed = rest;
        residentWeights += 8 * candidate.parameters();
      }
    }
    long device =
        residentWeights
            + streamingFloor(streamed, prefetchDepth, deviceWeightBytesPerParam)
            + activationsOnDevice;
    long streamedParams = streamed.stream().mapToLong(LayerCost::parameters).sum();
    // Per step: every gradient returns to the host; resident layers take their updated weights
    // back; streamed ones load in forward and again in backward, except the last ones the ring
    // still holds when backward begins.
    long stillHeld =
        streamed.subList(Math.max(0, streamed.size() - prefetchDepth), streamed.size()).stream()
            .mapToLong(LayerCost::parameters)
            .sum();
    long copied =
        (params - streamedParams) * 4 // resident gradients
            + streamedParams * deviceWeightBytesPerParam // streamed ones, in bf16 with bf16 slots
            + (params - streamedParams) * 4
            + (2 * streamedParams - stillHeld) * deviceWeightBytesPerParam;
    double copy = copied / profile.copyBytesPerSecond();
    long firstCopy =
        streamed.isEmpty() ? 0 : streamed.get(0).parameters() * deviceWeightBytesPerParam;
    double recompute = checkpointing ? compute / 3 : 0; // one more forward pass
    long forwardCopied = streamedParams * deviceWeightBytesPerParam;
    HostUpdateCost update =
        HostUpdateCost.of(
            layers,
            host,
            timing,
            profile.sharesHostCores(),
            optimizerStateBytes,
            bf16Weights,
            streamedParams,
            params == 0 ? 1 : (double) zero.largestShare(params) / params,
            forwardCopied,
            copied - forwardCopied);
    // A GPU copies beside its compute; the cpu backend's copies are memcpy on the cores its
    // compute runs on, so they add up (measured: plan 12-20% short of 2-core streamed steps when
    // it overlapped them, benchmarks/RESULTS.md).
    double onDevice =
        (profile.sharesHostCores()
                ? compute + recompute + copy
                : Math.max(compute + recompute, copy))
            + firstCopy / profile.copyBytesPerSecond();
    double streamedStep = update.stepSeconds(onDevice, compute / 3);
    double computePerSample = (compute + recompute) / batch;
    int minBatch = computePerSample == 0 ? 1 : (int) Math.ceil(copy / computePerSample);
    long share = zero.largestShare(params);
    // ZeRO-2 lands fp32 gradients in two slots and keeps the share's; else the whole slab, beside
    // the streamed layers' bf16 gradients where they cross in bf16 (HostSlabs).
    long hostGradients =
        zero.gradients()
            ? 4 * share + landingSlotBytes(layers, false)
            : 4 * params + (bf16Weights ? 2 * streamedParams : 0);
    long hostPinned =
        4 * params // masters, whole: every owner gathers the others' updated shares
            + hostGradients
            + share * optimizerStateBytes
            + (bf16Weights ? 2 * streamedParams : 0); // bf16 copies of the streamed weights
    List<String> streamedNames = streamed.stream().map(LayerCost::name).toList();
    List<String> residentNames = names.stream().filter(n -> !streamedNames.contains(n)).toList();
    return new PlacementPlan(
        Mode.OFFLOADED,
        batch,
        prefetchDepth,
        bf16Weights,
        checkpointing,
        residentNames,
        streamedNames,
        device,
        hostPinned,
        copied,
        compute + recompute,
        copy,
        residentStep,
        streamedStep,
        Math.max(1, minBatch),
        host,
        timing,
        update.hostSeconds(),
        streamedStep - onDevice);
  }

  /**
   * Device bytes streaming {@code layers} needs besides activations: a ring of {@code depth} slots
   * sized for the largest of them, two fp32 gradient slots for the device-to-host returns, and with
   * bf16 slots one fp32 working buffer the computing layer's weights are widened into.
   */
  static long streamingFloor(List<LayerCost> layers, int depth, long weightBytesPerParam) {
    long largest = layers.stream().mapToLong(LayerCost::parameters).max().orElse(0);
    // bf16 slots: an fp32 working copy of the weights, and two bf16 gradient slots beside the
    // fp32 ones (a gradient crosses the bus in bf16 as the weights do).
    long bf16 = weightBytesPerParam < 4 ? 4 + 2 * 2 : 0;
    return largest * (depth * weightBytesPerParam + bf16 + 2 * 4);
  }

  /**
   * Activation bytes with checkpointing: every layer's output kept (the next layer's input, from
   * which backward recomputes), the largest layer's per-sample activations (one arena, each layer
   * recomputed in it in turn), every layer's fixed part (running statistics stay; an upper bound
   * for the arena's share) and one gradient between layers (the largest output).
   */
  static long checkpointedActivations(List<LayerCost> layers, int batch) {
    long largest =
        layers.stream().mapToLong(l -> l.activationBytesPerSample() * batch).max().orElse(0)
            + layers.stream().mapToLong(LayerCost::activationBytesFixed).sum();
    long outputs = layers.stream().mapToLong(l -> l.outputBytesPerSample() * batch).sum();
    long boundary =
        layers.stream().mapToLong(l -> l.outputBytesPerSample() * batch).max().orElse(0);
    return outputs
        + largest
        + boundary
        + LayerCost.workspaceBytes(layers, batch)
        + LayerCost.gradientSlotBytes(layers, batch);
  }

  /**
   * What {@code devices} devices of a node sharing this plan's one host copy need ({@link
   * DeviceGroup}): device 0 pins the plan's host memory, each other device two landing slots of the
   * largest of {@code costs}' layers; each device's step is this plan's, and device 0's host
   * optimizer thread adds the other devices' gradients before each layer's update, at {@code
   * addBytesPerSecond} (12 bytes a parameter and device), which the step then also waits for.
   */
  public String renderNode(
      List<LayerCost> costs, int devices, int nodes, double addBytesPerSecond) {
    long slots = landingSlotBytes(costs, bf16Weights && !streamed.isEmpty());
    long params = costs.stream().mapToLong(LayerCost::parameters).sum();
    long node = hostPinnedBytes + (devices - 1) * slots;
    StringBuilder out = new StringBuilder();
    out.append(
        String.format(
            "node           %d device%s sharing one host copy (%d node%s): %s pinned a node (device"
                + " 0 %s, each other device %s of landing slots; %s with a copy each)%n",
            devices,
            devices == 1 ? "" : "s",
            nodes,
            nodes == 1 ? "" : "s",
            bytes(node),
            bytes(hostPinnedBytes),
            bytes(slots),
            bytes(devices * hostPinnedBytes)));
    if (mode == Mode.OFFLOADED && devices > 1) {
      double sum = (devices - 1) * 12.0 * params / addBytesPerSecond;
      out.append(
          String.format(
              "node step      %.2f ms, each device a batch of %d (%.2f ms of it adding the other"
                  + " devices' gradients on the host, %.1f GB/s)%n",
              (streamedStepSeconds + sum) * 1e3, batch, sum * 1e3, addBytesPerSecond / 1e9));
    }
    return out.toString();
  }

  /**
   * What a node's other device pins: two landing slots of the largest layer's gradient, in fp32
   * and, where streamed gradients cross in bf16 ({@code bf16}), in bf16 too.
   */
  public static long landingSlotBytes(List<LayerCost> costs, boolean bf16) {
    long largest = costs.stream().mapToLong(LayerCost::parameters).max().orElse(0);
    return 2 * (4 + (bf16 ? 2 : 0)) * largest;
  }

  /** The plan as the lines the {@code plan} command prints. */
  public String render(String model, DeviceProfile profile, long budgetBytes) {
    StringBuilder out = new StringBuilder();
    out.append(
        String.format(
            "model %s, batch %d, device %s (budget %s of %s, %.1f GB/s, %.1f TFLOP/s)%n",
            model,
            batch,
            profile.name(),
            bytes(budgetBytes),
            bytes(profile.memoryBytes()),
            profile.copyBytesPerSecond() / 1e9,
            profile.flopsPerSecond() / 1e12));
    out.append(String.format("placement      %s%n", mode.name().toLowerCase()));
    if (mode == Mode.OFFLOADED) {
      out.append(
          String.format(
              "resident       %d layers %s%nstreamed       %d layers %s%n",
              resident.size(), names(resident), streamed.size(), names(streamed)));
      out.append(
          String.format(
              "prefetch       %d slots, device weights %s, activation checkpointing %s%n",
              prefetchDepth,
              bf16Weights ? "bf16" : "fp32",
              activationCheckpointing ? "on" : "off"));
    }
    out.append(String.format("device memory  %s%n", bytes(deviceBytes)));
    out.append(String.format("host pinned    %s%n", bytes(hostPinnedBytes)));
    out.append(String.format("copied / step  %s%n", bytes(copiedBytesPerStep)));
    out.append(
        String.format(
            "step time      resident %.2f ms, streamed %.2f ms (compute %.2f ms, copies %.2f ms)%n",
            residentStepSeconds * 1e3,
            streamedStepSeconds * 1e3,
            computeSeconds * 1e3,
            copySeconds * 1e3));
    if (mode == Mode.OFFLOADED) {
      out.append(
          String.format(
              "host update    %.2f ms a step %s (host memory %s), %.2f ms of it exposed%n",
              hostSeconds * 1e3,
              hostUpdate.label(),
              (host.measured()
                      ? String.format(
                          "%.1f GB/s %s", host.bandwidthBytesPerSecond() / 1e9, host.name())
                      : "bandwidth unmeasured")
                  + (profile.sharesHostCores()
                      ? "; on the cores compute uses"
                      : ", shared with the copies"),
              exposedHostSeconds * 1e3));
    }
    out.append(String.format("copies hide behind compute from batch %d%n", minBatchToHideCopies));
    return out.toString();
  }

  /**
   * Why {@code batch} cannot train within the budget even streaming everything, leading with what
   * takes the memory, then the largest batch that fits and the budget (or the bf16 weight copies)
   * that would make this one fit.
   */
  private static String refusal(
      List<LayerCost> layers,
      int batch,
      long budgetBytes,
      int prefetchDepth,
      boolean bf16Weights,
      long needed,
      boolean checkpointing) {
    long perParam = bf16Weights ? 2 : 4;
    long slots = streamingFloor(layers, prefetchDepth, perParam);
    int fits = 0;
    for (int lo = 1, hi = batch - 1; lo <= hi; ) { // the floor grows with the batch
      int mid = (lo + hi) >>> 1;
      if (smallestFloor(layers, mid, prefetchDepth, perParam) <= budgetBytes) {
        fits = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    boolean bf16Helps =
        !bf16Weights && smallestFloor(layers, batch, prefetchDepth, 2) <= budgetBytes;
    LayerCost largest =
        layers.stream().max(Comparator.comparingLong(LayerCost::parameters)).orElseThrow();
    return String.format(
        "batch %d does not fit a device budget of %s even streaming every layer: its activations"
            + " need %s%s, and %s of weight slots and gradient staging for the largest layer %s"
            + " come on top; %s; batch %d needs a budget of %s%s",
        batch,
        bytes(budgetBytes),
        bytes(needed - slots),
        checkpointing ? " with activation checkpointing" : "",
        bytes(slots),
        largest.name(),
        fits > 0 ? "the largest batch that fits is " + fits : "not even batch 1 fits",
        batch,
        bytes(needed),
        bf16Helps ? ", or bf16 weight copies (--bf16-weights)" : "");
  }

  /** Streaming everything at {@code batch}: the slots and the activations, checkpointed if less. */
  private static long smallestFloor(
      List<LayerCost> layers, int batch, int prefetchDepth, long perParam) {
    long activations =
        layers.stream().mapToLong(l -> l.activationBytes(batch)).sum()
            + LayerCost.workspaceBytes(layers, batch);
    return streamingFloor(layers, prefetchDepth, perParam)
        + Math.min(activations, checkpointedActivations(layers, batch));
  }

  /** Up to eight names in full; a deep model's first three and last two around the count left. */
  static String names(List<String> layers) {
    if (layers.size() <= 8) {
      return layers.toString();
    }
    return "["
        + String.join(", ", layers.subList(0, 3))
        + ", … "
        + (layers.size() - 5)
        + " more …, "
        + String.join(", ", layers.subList(layers.size() - 2, layers.size()))
        + "]";
  }

  /**
   * What {@code layers} take resident at {@code batch}: weights, gradients and AdamW's moments of
   * every parameter, and the activations.
   */
  public static long residentBytes(List<LayerCost> layers, int batch) {
    return residentBytes(layers, batch, 1);
  }

  /**
   * As above, the optimizer's state split over {@code stateShares} ranks (ZeRO): the largest
   * share's, which a rank's device holds at most.
   */
  public static long residentBytes(List<LayerCost> layers, int batch, int stateShares) {
    long params = layers.stream().mapToLong(LayerCost::parameters).sum();
    long share = (params + stateShares - 1) / stateShares;
    return params * (4 + 4)
        + share * OPTIMIZER_BYTES_PER_PARAMETER
        + activationBytes(layers, batch);
  }

  /**
   * Each layer's own activations, and what they share once: the model's workspace (scratch) and
   * gradient slots.
   */
  private static long activationBytes(List<LayerCost> layers, int batch) {
    return layers.stream().mapToLong(l -> l.activationBytes(batch)).sum()
        + LayerCost.workspaceBytes(layers, batch)
        + LayerCost.gradientSlotBytes(layers, batch);
  }

  /** A byte count as MiB or GiB. */
  public static String bytes(long b) {
    return ByteSize.of(b);
  }
}
