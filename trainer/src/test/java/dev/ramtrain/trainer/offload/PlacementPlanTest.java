package dev.ramtrain.trainer.offload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.nn.ConvNeXt;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Precision;
import dev.ramtrain.trainer.nn.ResNet;
import dev.ramtrain.trainer.optim.AdamW;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.Optimizer;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class PlacementPlanTest {
  private static final DeviceProfile DEVICE = new DeviceProfile("test", 1L << 30, 10e9, 1e12);

  /**
   * Every architecture's layers (a CIFAR ResNet, torchvision's bottleneck ResNet, timm's ConvNeXt
   * with its one-image depthwise scratch, a ViT with its attention scores), measured alone, add up
   * to what the model and AdamW allocate together, byte for byte: the plan's device memory is not a
   * second formula. (On an H200 the same held within 0.2% for ResNet-50 and ViT-B/L at batch 32,
   * and the plan had said 22-37% too much for ConvNeXt while it counted one image's depthwise
   * scratch per sample.)
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("architectures")
  void measuredLayerCostsAddUpToWhatTheBackendAllocatesForTheModel(
      String spec, ImageShape shape, Function<ImageShape, List<Layer>> layers) {
    int batch = 5;
    List<LayerCost> costs;
    try (Backend b = new CpuBackend(1)) {
      costs = LayerCost.measure(() -> layers.apply(shape), b);
      assertEquals(0, b.allocatedBytes(), "measuring frees what it allocates");
    }
    PlacementPlan plan = PlacementPlan.plan(costs, batch, 1L << 30, 2, false, DEVICE);
    assertEquals(PlacementPlan.Mode.RESIDENT, plan.mode());
    try (Backend b = new CpuBackend(1)) {
      var s = b.createStream("s");
      try (Model model = Model.build(spec, layers.apply(shape), b, s, batch, 1);
          Optimizer adamw =
              new AdamW(b, model.parameters().count(), new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f))) {
        assertEquals(
            b.allocatedBytes(),
            plan.deviceBytes(),
            "the plan's device memory is the model's and AdamW's actual allocation");
        assertEquals(
            model.parameters().count(), costs.stream().mapToLong(LayerCost::parameters).sum());
      }
    }
    // ZeRO over 3 resident ranks: the device holds the largest share's moments.
    PlacementPlan zero =
        PlacementPlan.plan(
            costs, batch, 1L << 30, 2, false, DEVICE, false, 8, new PlacementPlan.Zero(3, false));
    try (Backend b = new CpuBackend(1)) {
      var s = b.createStream("s");
      try (Model model = Model.build(spec, layers.apply(shape), b, s, batch, 1)) {
        long n = model.parameters().count();
        int largest = 0;
        for (int r = 1; r < 3; r++) {
          if (share(n, r) > share(n, largest)) {
            largest = r;
          }
        }
        long from = dev.ramtrain.trainer.dist.TcpRing.chunkStart(n, largest, 3);
        try (Optimizer share =
            new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f)
                .onDevice(b, model.parameters(), from, from + share(n, largest))) {
          assertEquals(b.allocatedBytes(), zero.deviceBytes(), "ZeRO's largest share");
        }
      }
    }
  }

  /** The length of rank {@code r}'s ZeRO share of {@code n} parameters over 3 ranks. */
  private static long share(long n, int r) {
    return dev.ramtrain.trainer.dist.TcpRing.chunkStart(n, r + 1, 3)
        - dev.ramtrain.trainer.dist.TcpRing.chunkStart(n, r, 3);
  }

  static java.util.stream.Stream<Arguments> architectures() {
    Function<ImageShape, List<Layer>> cifar = shape -> ModelSpec.parse("resnet:8-4-3", shape);
    ResNet.Config bottleneck = new ResNet.Config(true, new int[] {1, 1, 1, 1}, 8);
    ConvNeXt.Config convnext =
        new ConvNeXt.Config(new int[] {1, 1, 1, 1}, new int[] {8, 16, 16, 16});
    Function<ImageShape, List<Layer>> vit = shape -> ModelSpec.parse("vit:4-32-2-4-5", shape);
    return java.util.stream.Stream.of(
        Arguments.of("resnet:8-4-3", new ImageShape(12, 12, 3), cifar),
        Arguments.of(
            "resnet-bottleneck",
            new ImageShape(64, 64, 3),
            (Function<ImageShape, List<Layer>>)
                shape -> ResNet.layers(bottleneck, shape, 5, Precision.FP32)),
        Arguments.of(
            "convnext-tiny",
            new ImageShape(64, 64, 3),
            (Function<ImageShape, List<Layer>>)
                shape -> ConvNeXt.layers(convnext, shape, 5, 0f, Precision.FP32)),
        Arguments.of("vit:4-32-2-4-5", new ImageShape(32, 32, 3), vit));
  }

  /**
   * Predictions come from the layers' times on the backend once measured, not from FLOPs: a layer
   * that takes 2 ms per sample at batch 4 costs 8 ms, and a resident step adds the optimizer.
   */
  @Test
  void measuredLayerTimesReplaceTheFlopsEstimate() {
    List<LayerCost> timed = new java.util.ArrayList<>();
    for (LayerCost c : threeLayers()) {
      timed.add(asTimed(c, 5e-4, true));
    }
    PlacementPlan resident = PlacementPlan.plan(timed, 4, 1L << 40, 2, false, DEVICE);
    assertEquals(3 * 4 * 2e-3, resident.computeSeconds(), 1e-12);
    assertEquals(3 * 4 * 2e-3 + 3e-3, resident.residentStepSeconds(), 1e-12);
    PlacementPlan offloaded = PlacementPlan.plan(timed, 4, 1L << 40, 2, false, DEVICE, true);
    assertEquals(
        Math.max(3 * 4 * 2e-3, offloaded.copySeconds()) + 3 * 5e-4,
        offloaded.streamedStepSeconds(),
        1e-12,
        "offloaded: compute or copies, and the host update nothing hides");
    PlacementPlan flops = PlacementPlan.plan(threeLayers(), 4, 1L << 40, 2, false, DEVICE);
    assertEquals(4 * (42L << 20) / 1e12, flops.computeSeconds(), 1e-12, "unmeasured: FLOPs/rate");
  }

  /**
   * On a GPU the host updates each layer beside backward, but the first layers' updates land last
   * and the next forward needs them: when the host's work outlasts backward, it bounds the step
   * (the forward, every hidden update, the exposed last one), as an H200 showed (host AdamW 122 ms,
   * device 93 ms, step 171 ms).
   */
  @Test
  void aHostOptimizerSlowerThanBackwardBoundsTheStreamedStep() {
    List<LayerCost> fast = new java.util.ArrayList<>();
    List<LayerCost> slowHost = new java.util.ArrayList<>();
    List<LayerCost> three = threeLayers();
    for (int i = 0; i < three.size(); i++) {
      LayerCost c = three.get(i);
      fast.add(asTimed(c, 0, false));
      slowHost.add(asTimed(c, 20e-3, i == 0)); // the first layer's gradient lands last
    }
    double onDevice =
        PlacementPlan.plan(fast, 4, 1L << 40, 2, false, DEVICE, true).streamedStepSeconds();
    PlacementPlan plan = PlacementPlan.plan(slowHost, 4, 1L << 40, 2, false, DEVICE, true);
    double compute = 3 * 4 * 2e-3;
    assertEquals(
        Math.max(onDevice, compute / 3 + 40e-3) + 20e-3, plan.streamedStepSeconds(), 1e-12);
    assertTrue(plan.streamedStepSeconds() >= 60e-3, "at least the host's whole update");
  }

  /**
   * Planned for a GPU from its profile alone (the layers not timed), the host update is its bytes
   * over the host's bandwidth: AdamW reads a parameter's gradient, weight and two fp32 moments and
   * writes weight and moments, 28 bytes (20 with bf16 moments). The copies to and from the device
   * during backward read and write the same memory: the hidden update is stretched by their bytes
   * over that bandwidth (on an H200 the plan read 15-19% short without it), and the first layer's
   * update, which lands last, still shows.
   */
  @Test
  void theHostUpdateIsItsBytesOverTheHostsBandwidthSharedWithTheCopies() {
    List<LayerCost> layers = threeLayers(); // 7 M parameters, the first layer's 1 M
    long p = 7L << 20;
    double bandwidth = 20e9;
    HostProfile host = new HostProfile("test", bandwidth);
    PlacementPlan plan = offloaded(layers, host, HostUpdateTiming.AS_GRADIENTS_LAND, 8);
    assertTrue(plan.streamed().isEmpty(), "everything fits: the optimizer alone is offloaded");
    // Every gradient goes out and every updated weight comes back: 8 bytes a parameter, all of
    // it during backward and the update.
    assertEquals(8 * p, plan.copiedBytesPerStep());
    double compute = 4 * (42L << 20) / 1e12;
    double onDevice = Math.max(compute, 8 * p / 10e9);
    double update = 28.0 * p / bandwidth;
    double last = 28.0 * (1 << 20) / bandwidth;
    assertEquals(update, plan.hostSeconds(), 1e-15);
    assertEquals(
        Math.max(onDevice, compute / 3 + update - last + 8 * p / bandwidth) + last,
        plan.streamedStepSeconds(),
        1e-12);
    assertTrue(plan.streamedStepSeconds() > onDevice, "this host update outlasts backward");
    PlacementPlan unshared =
        offloaded(layers, HostProfile.UNMEASURED, HostUpdateTiming.AS_GRADIENTS_LAND, 8);
    assertEquals(onDevice, unshared.streamedStepSeconds(), 1e-15, "a host of unknown speed");
    assertEquals(
        20.0 / 28 * update,
        offloaded(layers, host, HostUpdateTiming.AS_GRADIENTS_LAND, 4).hostSeconds(),
        1e-15,
        "bf16 moments: 20 bytes a parameter");
  }

  /**
   * When the host update runs decides what the step waits for: serially after backward, all of it
   * and the norm's read of the gradients; speculatively, as the gradients land but with the kept
   * copy of masters and moments (read and written) and the norm's read on the host's memory too;
   * delayed, on into the next forward with the published weights' refresh, which it bounds only by
   * outlasting the step with every copy (clipped: between backward and the next backward). On the
   * host's own cores (the cpu backend) all of it shows, whenever it runs.
   */
  @Test
  void whenTheHostUpdateRunsDecidesWhatTheStepWaitsFor() {
    List<LayerCost> layers = threeLayers();
    long p = 7L << 20;
    double bandwidth = 20e9;
    HostProfile host = new HostProfile("test", bandwidth);
    double compute = 4 * (42L << 20) / 1e12;
    double onDevice = Math.max(compute, 8 * p / 10e9);
    double update = 28.0 * p / bandwidth;
    double norm = 4.0 * p / bandwidth;
    double copies = 8.0 * p / bandwidth;
    double last = 28.0 * (1 << 20) / bandwidth;
    double kept = 2 * 12.0 * p / bandwidth;
    assertEquals(
        onDevice + update + norm,
        offloaded(layers, host, HostUpdateTiming.AFTER_BACKWARD, 8).streamedStepSeconds(),
        1e-12);
    assertEquals(
        Math.max(onDevice, compute / 3 + update - last + copies + kept + norm) + last,
        offloaded(layers, host, HostUpdateTiming.SPECULATIVE, 8).streamedStepSeconds(),
        1e-12);
    assertEquals(
        update + kept + norm,
        offloaded(layers, host, HostUpdateTiming.SPECULATIVE, 8).hostSeconds(),
        1e-15);
    double publish = 8.0 * p / bandwidth; // the published weights refreshed from the masters
    PlacementPlan delayed = offloaded(layers, host, HostUpdateTiming.DELAYED, 8);
    assertEquals(
        Math.max(onDevice, update + publish + copies), delayed.streamedStepSeconds(), 1e-12);
    assertEquals(
        Math.max(onDevice, onDevice - compute / 3 + update + norm + publish),
        offloaded(layers, host, HostUpdateTiming.DELAYED_AFTER_BACKWARD, 8).streamedStepSeconds(),
        1e-12,
        "delayed and clipped: after backward, before the next one");
    assertEquals(delayed.streamedStepSeconds() - onDevice, delayed.exposedHostSeconds(), 1e-15);

    DeviceProfile cores = new DeviceProfile("cores", 1L << 30, 10e9, 1e12, true, Long.MAX_VALUE);
    double onCores = compute + 8 * p / 10e9; // copies take compute's cores
    for (HostUpdateTiming t : HostUpdateTiming.values()) {
      double extra =
          switch (t) {
            case AFTER_BACKWARD -> norm;
            case SPECULATIVE -> kept + norm;
            case AS_GRADIENTS_LAND -> 0;
            case DELAYED -> publish;
            case DELAYED_AFTER_BACKWARD -> norm + publish;
          };
      PlacementPlan plan =
          PlacementPlan.plan(
              layers, 4, 1L << 40, 2, false, cores, true, 8, PlacementPlan.Zero.NONE, host, t);
      assertEquals(onCores + update + extra, plan.streamedStepSeconds(), 1e-12, t.label());
    }
  }

  /** {@code layers} offloaded on {@link #DEVICE} at batch 4, everything fitting. */
  private static PlacementPlan offloaded(
      List<LayerCost> layers, HostProfile host, HostUpdateTiming timing, int stateBytes) {
    return PlacementPlan.plan(
        layers,
        4,
        1L << 40,
        2,
        false,
        DEVICE,
        true,
        stateBytes,
        PlacementPlan.Zero.NONE,
        host,
        timing);
  }

  /** {@code c} as if timed: 2 ms per sample, a 1 ms device update, the given host update. */
  private static LayerCost asTimed(LayerCost c, double hostUpdateSeconds, boolean exposed) {
    return new LayerCost(
        c.name(),
        c.parameters(),
        c.activationBytesFixed(),
        c.activationBytesPerSample(),
        c.outputBytesPerSample(),
        c.flopsPerSample(),
        2e-3,
        1e-3,
        0,
        0,
        hostUpdateSeconds,
        exposed,
        c.gradientSlots(),
        c.largestInputBytesPerSample());
  }

  @Test
  void timingALayerMeasuresItsStepAndItsUpdateOnTheBackend() {
    String spec = "cnn:cb4-p-f8-3";
    ImageShape shape = new ImageShape(8, 8, 1);
    try (Backend b = new CpuBackend(1)) {
      List<LayerCost> costs = LayerCost.measure(() -> ModelSpec.parse(spec, shape), b);
      List<LayerCost> timed = LayerCost.timed(costs, () -> ModelSpec.parse(spec, shape), b, 16, 1);
      assertEquals(costs.size(), timed.size());
      for (int i = 0; i < costs.size(); i++) {
        LayerCost t = timed.get(i);
        assertTrue(t.measured() && t.secondsPerSample() > 0, t.toString());
        assertEquals(t.parameters() > 0, t.updateSeconds() > 0, t.toString());
        // The CPU backend's compute and the host optimizer share the cores: all of it shows.
        assertEquals(t.parameters() > 0, t.exposedHostUpdateSeconds() > 0, t.toString());
        assertEquals(costs.get(i).activationBytesPerSample(), t.activationBytesPerSample());
      }
      assertEquals(0, b.allocatedBytes(), "timing frees what it allocates");
    }
  }

  /** Three layers of 1, 4 and 2 M parameters, 1 MiB of activations per sample each. */
  private static List<LayerCost> threeLayers() {
    return List.of(
        new LayerCost("a", 1 << 20, 0, 1 << 20, 1 << 16, 6L << 20),
        new LayerCost("b", 4 << 20, 0, 1 << 20, 1 << 16, 24L << 20),
        new LayerCost("c", 2 << 20, 0, 1 << 20, 1 << 16, 12L << 20));
  }

  /** Ten layers of 1M parameters, 1 MiB of activations per sample and 6 MFLOP per sample each. */
  private static List<LayerCost> tenLayers() {
    List<LayerCost> layers = new java.util.ArrayList<>();
    for (int i = 0; i < 10; i++) {
      layers.add(new LayerCost("l" + i, 1 << 20, 0, 1 << 20, 1 << 16, 6L << 20));
    }
    return layers;
  }

  /**
   * Offloaded under ZeRO the pinned host copy keeps the masters whole (every owner gathers the
   * updated shares), the optimizer state of the largest share and, stage 2, the share's gradients
   * beside two fp32 landing slots of the largest layer instead of the whole fp32 and bf16 gradient
   * slabs: the bytes by which DataParallelTrainingTest measures a share's owner's pinned memory
   * drop.
   */
  @Test
  void zeroSharesTheOffloadedHostCopysStateAndGradients() {
    long n = 10L << 20;
    long layer = 1L << 20;
    long budget = 100L << 20;
    PlacementPlan none =
        PlacementPlan.plan(
            tenLayers(), 4, budget, 2, true, DEVICE, true, 8, PlacementPlan.Zero.NONE);
    PlacementPlan one =
        PlacementPlan.plan(
            tenLayers(), 4, budget, 2, true, DEVICE, true, 8, new PlacementPlan.Zero(3, false));
    PlacementPlan two =
        PlacementPlan.plan(
            tenLayers(), 4, budget, 2, true, DEVICE, true, 8, new PlacementPlan.Zero(3, true));
    long streamed = none.streamed().size() * layer;
    assertTrue(
        streamed > 0, "bf16 copies and gradients of the streamed layers: " + none.streamed());
    // fp32 masters, fp32 and bf16 gradients, AdamW's two fp32 moments, the bf16 copies
    assertEquals(4 * n + 4 * n + 2 * streamed + 8 * n + 2 * streamed, none.hostPinnedBytes());
    long share = (n + 2) / 3; // the largest of three
    assertEquals(none.hostPinnedBytes() - 8 * (n - share), one.hostPinnedBytes(), "ZeRO-1");
    assertEquals(
        one.hostPinnedBytes() - 4 * (n - share) - 2 * streamed + 2 * 4 * layer,
        two.hostPinnedBytes(),
        "ZeRO-2");
    assertEquals(none.deviceBytes(), two.deviceBytes(), "the device's share of the work is whole");
  }

  /**
   * Ten 4 MiB layers fit a 1 GiB budget resident, but on a device whose largest allocation is 10
   * MiB (the cpu backend's 2 GiB, scaled) their 40 MiB slab of weights cannot be one: the plan
   * offloads, keeping resident the most layers whose weights fit one allocation (two), and the rest
   * stream.
   */
  @Test
  void residentWeightsStayWithinTheDevicesLargestAllocation() {
    DeviceProfile capped =
        new DeviceProfile(
            "capped",
            DEVICE.memoryBytes(),
            DEVICE.copyBytesPerSecond(),
            DEVICE.flopsPerSecond(),
            true,
            10L << 20);
    int batch = 2;
    assertEquals(
        PlacementPlan.Mode.RESIDENT,
        PlacementPlan.plan(tenLayers(), batch, 1L << 30, 2, false, DEVICE).mode());
    PlacementPlan plan = PlacementPlan.plan(tenLayers(), batch, 1L << 30, 2, false, capped);
    assertEquals(PlacementPlan.Mode.OFFLOADED, plan.mode());
    assertEquals(2, plan.resident().size(), plan.resident().toString());
    assertEquals(8, plan.streamed().size(), plan.streamed().toString());
    // Exactly at the limit: 40 MiB of weights in one allocation stay resident.
    DeviceProfile exact =
        new DeviceProfile(
            "exact",
            DEVICE.memoryBytes(),
            DEVICE.copyBytesPerSecond(),
            DEVICE.flopsPerSecond(),
            true,
            40L << 20);
    assertEquals(
        PlacementPlan.Mode.RESIDENT,
        PlacementPlan.plan(tenLayers(), batch, 1L << 30, 2, false, exact).mode());
  }

  @Test
  void partialOffloadKeepsWhatFitsResidentAndStreamsTheRest() {
    int batch = 4;
    long activations = 10L * 4 * (1 << 20); // 40 MiB
    // All resident with AdamW on the device: 10M × 16 bytes + 40 MiB = 200 MiB. Budget 100 MiB:
    // k resident layers (8 bytes per parameter: weights and gradients), a ring of 2 fp32 weight
    // slots and 2 gradient slots for the streamed ones (16 MiB), the activations:
    // 8k + 16 + 40 <= 100 -> k = 5.
    long budget = 100L << 20;
    PlacementPlan plan = PlacementPlan.plan(tenLayers(), batch, budget, 2, false, DEVICE);
    assertEquals(PlacementPlan.Mode.OFFLOADED, plan.mode());
    assertEquals(List.of("l0", "l1", "l2", "l3", "l4"), plan.resident());
    assertEquals(List.of("l5", "l6", "l7", "l8", "l9"), plan.streamed());
    assertEquals((40L << 20) + (16L << 20) + activations, plan.deviceBytes());
    // Every gradient returns (4 bytes × 10M), resident layers take their new weights back (4 ×
    // 5M), streamed weights load in forward and again in backward except the two the ring still
    // holds when backward begins (4 × (10M - 2M)).
    assertEquals((40L + 20 + 32) << 20, plan.copiedBytesPerStep());
    assertEquals(10L * (1 << 20) * 16, plan.hostPinnedBytes(), "masters, grads, AdamW moments");
    double compute = 60.0 * (1 << 20) * batch / 1e12;
    assertEquals(compute, plan.computeSeconds(), 1e-12);
    assertEquals((92.0 * (1 << 20)) / 10e9, plan.copySeconds(), 1e-12);
    assertEquals(
        Math.max(compute, plan.copySeconds()) + 4.0 * (1 << 20) / 10e9,
        plan.streamedStepSeconds(),
        1e-12,
        "the longer of compute and copies, plus the first layer's copy");
    // On the cpu backend the copies take the cores compute runs on: they add up.
    DeviceProfile host =
        new DeviceProfile(
            "cpu",
            DEVICE.memoryBytes(),
            DEVICE.copyBytesPerSecond(),
            DEVICE.flopsPerSecond(),
            true,
            Long.MAX_VALUE);
    assertEquals(
        compute + plan.copySeconds() + 4.0 * (1 << 20) / 10e9,
        PlacementPlan.plan(tenLayers(), batch, budget, 2, false, host).streamedStepSeconds(),
        1e-12,
        "compute, then copies, plus the first layer's copy");
    int minBatch = plan.minBatchToHideCopies();
    assertTrue(60.0 * (1 << 20) * minBatch / 1e12 >= plan.copySeconds());
    assertTrue(60.0 * (1 << 20) * (minBatch - 1) / 1e12 < plan.copySeconds());

    PlacementPlan bf16 = PlacementPlan.plan(tenLayers(), batch, budget, 2, true, DEVICE);
    // bf16 slots take 2 bytes a parameter, plus one fp32 working buffer and two bf16 gradient
    // slots beside the fp32 ones: at depth 2, 4 + 4 + 4 + 8 = 20 MiB (8k + 20 + 40 <= 100 -> k =
    // 5), so the same 5 layers stream; their weights and gradients move as 2 bytes: 4 × 5M + 2 ×
    // 5M of gradients, 4 × 5M of resident weights, 2 × (10M - 2M) of streamed ones.
    assertEquals(5, bf16.streamed().size(), bf16.streamed().toString());
    assertEquals((20L + 10 + 20 + 16) << 20, bf16.copiedBytesPerStep());
    PlacementPlan deep = PlacementPlan.plan(tenLayers(), batch, budget, 4, true, DEVICE);
    // At depth 4 the bf16 ring takes 8 + 4 + 4 + 8 = 24 MiB, and the resident layers stay as many
    // as fit beside it (8k + 24 + 40 <= 100 -> k = 4).
    assertEquals((32L << 20) + (24L << 20) + activations, deep.deviceBytes());

    PlacementPlan roomy = PlacementPlan.plan(tenLayers(), batch, 150L << 20, 2, false, DEVICE);
    assertEquals(PlacementPlan.Mode.OFFLOADED, roomy.mode(), "AdamW's moments do not fit");
    assertEquals(List.of(), roomy.streamed(), "optimizer offload alone: every weight resident");
    assertEquals(80L << 20, roomy.copiedBytesPerStep(), "gradients out, new weights in");
  }

  /**
   * A partial offload built as planned allocates exactly the plan's device bytes, and a step moves
   * exactly the plan's bytes each way; with bf16 slots too (the weights in and the streamed layers'
   * gradients out in bf16).
   */
  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
  void anOffloadedModelAllocatesAndCopiesWhatItsPlanSays(boolean bf16) {
    String spec = "mlp:64-128-128-128-128-128-128-128-10";
    int batch = 8;
    List<LayerCost> costs;
    try (Backend b = new CpuBackend(1)) {
      costs = LayerCost.measure(() -> ModelSpec.parse(spec), b);
    }
    long weightsResident =
        PlacementPlan.plan(costs, batch, 1L << 30, 2, false, DEVICE, true).deviceBytes();
    PlacementPlan plan =
        PlacementPlan.plan(costs, batch, weightsResident * 9 / 10, 2, bf16, DEVICE);
    assertEquals(PlacementPlan.Mode.OFFLOADED, plan.mode());
    assertEquals(bf16, plan.bf16Weights());
    assertTrue(!plan.streamed().isEmpty() && !plan.resident().isEmpty(), plan.toString());
    try (Backend b = new CpuBackend(1)) {
      var s = b.createStream("s");
      try (OffloadedLearner learner =
          OffloadedLearner.build(
              new ModelBlueprint(spec, () -> ModelSpec.parse(spec), batch, 1),
              Streaming.of(plan),
              (slab, threads) ->
                  new HostAdamW(
                      b,
                      slab.masters(),
                      slab.gradients(),
                      new AdamWSpec(0.9f, 0.999f, 1e-8f, 0f),
                      threads),
              1,
              0f,
              b,
              s)) {
        assertEquals(plan.deviceBytes(), b.allocatedBytes(), "device memory as planned");
        assertEquals(plan.hostPinnedBytes(), b.allocatedHostBytes(), "pinned memory as planned");
        try (var x = b.allocate("x", dev.ramtrain.trainer.backend.DType.F32, batch * 64L);
            var dy = b.allocate("dy", dev.ramtrain.trainer.backend.DType.F32, batch * 10L)) {
          java.util.Map<String, Object> m = java.util.Map.of();
          for (int step = 0; step < 2; step++) { // the second step uploads updated weights
            learner.beginStep(s, step);
            learner.forward(s, x, batch, true);
            learner.backwardAndUpdate(s, dy, batch, 1e-3f);
            m = learner.stepMetrics(s);
          }
          assertEquals(
              plan.copiedBytesPerStep(),
              (long) m.get("h2d_bytes") + (long) m.get("d2h_bytes"),
              "bytes copied per step as planned: " + m);
        }
      }
    }
  }

  /**
   * A budget too small for a ResNet's activations: the plan checkpoints them, and the model built
   * so allocates no more than the plan says (recomputing in one arena) and trains a step in it.
   */
  @Test
  void aCheckpointedModelFitsThePlansDeviceMemory() {
    // Residual blocks: what checkpointing saves is their inner activations (a plain CNN's layers
    // keep only their outputs, which checkpointing keeps too).
    String spec = "resnet:8-8-10";
    ImageShape shape = new ImageShape(16, 16, 3);
    int batch = 16;
    List<LayerCost> costs;
    try (Backend b = new CpuBackend(1)) {
      costs = LayerCost.measure(() -> ModelSpec.parse(spec, shape), b);
    }
    long budget = PlacementPlan.plan(costs, batch, 1L << 30, 2, false, DEVICE, true).deviceBytes();
    PlacementPlan plan = PlacementPlan.plan(costs, batch, budget, 2, false, DEVICE);
    while (!plan.activationCheckpointing()) {
      budget = budget * 9 / 10;
      plan = PlacementPlan.plan(costs, batch, budget, 2, false, DEVICE);
    }
    try (Backend b = new CpuBackend(1)) {
      var s = b.createStream("s");
      PlacementPlan planned = plan;
      try (OffloadedLearner learner =
          OffloadedLearner.build(
              new ModelBlueprint(spec, () -> ModelSpec.parse(spec, shape), batch, 1),
              Streaming.of(planned),
              (slab, threads) ->
                  new HostAdamW(
                      b,
                      slab.masters(),
                      slab.gradients(),
                      new AdamWSpec(0.9f, 0.999f, 1e-8f, 0f),
                      threads),
              1,
              0f,
              b,
              s)) {
        long allocated = b.allocatedBytes();
        assertTrue(
            allocated <= plan.deviceBytes() && plan.deviceBytes() <= budget,
            allocated + " allocated, " + plan.deviceBytes() + " planned, budget " + budget);
        try (var x = b.allocate("x", dev.ramtrain.trainer.backend.DType.F32, batch * 768L);
            var dy = b.allocate("dy", dev.ramtrain.trainer.backend.DType.F32, batch * 10L)) {
          b.resetPeakAllocatedBytes();
          learner.beginStep(s, 0);
          learner.forward(s, x, batch, true);
          learner.backwardAndUpdate(s, dy, batch, 1e-3f);
          learner.stepMetrics(s);
          assertEquals(allocated + x.bytes() + dy.bytes(), b.peakAllocatedBytes(), "no more");
        }
      }
    }
  }

  @Test
  void tooSmallABudgetNamesTheLayerAndTheBytesItNeeds() {
    var e =
        assertThrows(
            IllegalArgumentException.class,
            () -> PlacementPlan.plan(threeLayers(), 4, 20L << 20, 2, false, DEVICE));
    assertTrue(e.getMessage().contains("64.0 MiB of weight slots"), e.getMessage()); // 4M × 16
    assertTrue(e.getMessage().contains("the largest layer b come"), e.getMessage());
    assertTrue(e.getMessage().contains("not even batch 1 fits"), e.getMessage());
  }

  /**
   * Activations that outgrow the budget: the refusal leads with them, names the largest batch that
   * fits (the plan at that batch succeeds, one more fails) and the budget the asked one needs.
   */
  @Test
  void aBatchTooLargeForTheBudgetNamesTheLargestThatFits() {
    List<LayerCost> layers =
        List.of(
            new LayerCost("a", 1 << 10, 0, 1 << 20, 1 << 20, 1 << 20),
            new LayerCost("b", 1 << 10, 0, 1 << 20, 1 << 20, 1 << 20));
    long budget = 40L << 20;
    var e =
        assertThrows(
            IllegalArgumentException.class,
            () -> PlacementPlan.plan(layers, 64, budget, 2, false, DEVICE));
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("the largest batch that fits is (\\d+)")
            .matcher(e.getMessage());
    assertTrue(e.getMessage().startsWith("batch 64 does not fit"), e.getMessage());
    assertTrue(m.find(), e.getMessage());
    int fits = Integer.parseInt(m.group(1));
    PlacementPlan.plan(layers, fits, budget, 2, false, DEVICE); // fits
    assertThrows(
        IllegalArgumentException.class,
        () -> PlacementPlan.plan(layers, fits + 1, budget, 2, false, DEVICE));
  }

  @Test
  void activationCheckpointingWhenTheActivationsAloneDoNotFit() {
    // 64 MiB of activations per sample per layer at batch 1: only outputs plus one layer fit.
    List<LayerCost> layers =
        List.of(
            new LayerCost("a", 1 << 10, 0, 64 << 20, 1 << 20, 1 << 20),
            new LayerCost("b", 1 << 10, 0, 64 << 20, 1 << 20, 1 << 20),
            new LayerCost("c", 1 << 10, 0, 64 << 20, 1 << 20, 1 << 20));
    PlacementPlan plan = PlacementPlan.plan(layers, 1, 100L << 20, 2, false, DEVICE);
    assertTrue(plan.activationCheckpointing());
    assertTrue(plan.deviceBytes() <= 100L << 20, "fits: " + plan.deviceBytes());
    assertTrue(plan.computeSeconds() > 3L * (1 << 20) / 1e12, "recomputation is counted");
  }
}
