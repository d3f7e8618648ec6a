package dev.ramtrain.trainer.offload;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.ResidentLearner;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.SimulatedBus;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.EmaDecay;
import dev.ramtrain.trainer.optim.Optimizer;
import dev.ramtrain.trainer.optim.ParamGroups;
import dev.ramtrain.trainer.optim.SgdSpec;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Offloaded training (host optimizer applied layer by layer as gradients land, or after backward
 * when clipping) must end with the resident run's weights, batch-norm statistics and optimizer
 * state bit for bit, whatever the placement, ring depth, optimizer, clipping or copy timing; and a
 * checkpoint of either mode resumes in the other. Runs on every backend: a subclass says how to
 * open one.
 */
public abstract class OffloadedTrainingTest {
  /**
   * A backend for one run; {@code bus} says how slow host-device copies are (a backend that cannot
   * slow them down by that schedule slows them its own way: what matters is that results must not
   * depend on it).
   */
  protected abstract Backend open(SimulatedBus bus);

  private static final int BATCH = 6;
  private static final Set<String> ALL = Set.of("conv1", "conv2", "fc1", "fc2");

  /** The model a run trains, and the images it takes. */
  private record Net(String spec, ImageShape shape) {}

  private static final Net CNN = new Net("cnn:cb4-p-c6-p-d0.25-f10-3", new ImageShape(8, 8, 1));

  /** Every test trains the CNN unless it says otherwise, every parameter alike. */
  private Net net = CNN;

  /** Whether an offloaded clipped step speculates ({@link SpeculativeClip}). */
  private boolean speculative;

  /**
   * Poisons the inputs of this step with a NaN (a step whose gradients are not finite); -1: none.
   */
  private int poisonedStep = -1;

  /** Per step of the last offloaded run: whether its speculative clipped update ran again. */
  private final List<Boolean> redone = new java.util.ArrayList<>();

  private ParamGroups.Rules groups = ParamGroups.Rules.NONE;

  /** The host AdamW's moments in every offloaded run of a test. */
  private OffloadSpec.OptimizerState optimizerState = OffloadSpec.OptimizerState.FP32;

  /** --ema's decay for every run of a test; 0: none. */
  private float emaDecay;

  /**
   * How a run is set up: {@code how} null is resident training; a {@code reference} is resident
   * training computing what bf16 slots or a delayed update compute, the plain way; then the
   * optimizer, clipping and the copies' timing.
   */
  private record Setup(
      Streaming how,
      Streaming reference,
      boolean sgd,
      float clipNorm,
      SimulatedBus bus,
      boolean slowHost) {
    static Setup resident() {
      return new Setup(null, null, false, 0, SimulatedBus.NONE, false);
    }

    static Setup referenceFor(Setup offloaded) {
      return new Setup(
          null, offloaded.how(), offloaded.sgd(), offloaded.clipNorm(), SimulatedBus.NONE, false);
    }

    /** Host updates that each sleep up to 15 ms first: races with the host thread show. */
    Setup withSlowHost() {
      return new Setup(how, reference, sgd, clipNorm, bus, true);
    }

    Setup offloaded(Set<String> layers, int ringDepth) {
      return with(new Streaming(layers, ringDepth, false, false, false, 0));
    }

    Setup withBf16Slots() {
      return with(
          new Streaming(
              how.streamed(),
              how.prefetchDepth(),
              true,
              how.activationCheckpointing(),
              how.delayedUpdate(),
              how.delayWarmupSteps()));
    }

    Setup checkpointed() {
      return with(
          new Streaming(
              how.streamed(),
              how.prefetchDepth(),
              how.bf16Weights(),
              true,
              how.delayedUpdate(),
              how.delayWarmupSteps()));
    }

    /** The update delayed one step from step {@code warmup} on. */
    Setup delayedFrom(int warmup) {
      return with(
          new Streaming(
              how.streamed(),
              how.prefetchDepth(),
              how.bf16Weights(),
              how.activationCheckpointing(),
              true,
              warmup));
    }

    private Setup with(Streaming streaming) {
      return new Setup(streaming, reference, sgd, clipNorm, bus, slowHost);
    }

    Setup withSgd() {
      return new Setup(how, reference, true, clipNorm, bus, slowHost);
    }

    Setup clipped(float norm) {
      return new Setup(how, reference, sgd, norm, bus, slowHost);
    }

    Setup over(SimulatedBus slowBus) {
      return new Setup(how, reference, sgd, clipNorm, slowBus, slowHost);
    }
  }

  private Learner learner(Setup setup, Backend b, Stream s) {
    String spec = net.spec();
    ImageShape shape = net.shape();
    if (setup.how() == null) {
      Model model = Model.build(spec, ModelSpec.parse(spec, shape), b, s, BATCH, 3);
      Optimizer opt =
          setup.sgd()
              ? new SgdSpec(0.9f, 0.01f, true, groups).onDevice(b, model.parameters())
              : new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f, groups).onDevice(b, model.parameters());
      return setup.reference() == null
          ? new ResidentLearner(b, model, opt, setup.clipNorm())
          : new Reference(b, model, opt, setup.reference(), setup.clipNorm());
    }
    return OffloadedLearner.build(
        new ModelBlueprint(spec, () -> ModelSpec.parse(spec, shape), BATCH, 3),
        setup.how(),
        (slab, threads) -> {
          HostOptimizer opt =
              HostOptimizer.create(
                  setup.sgd()
                      ? new SgdSpec(0.9f, 0.01f, true, groups)
                      : new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f, groups),
                  b,
                  slab,
                  threads,
                  optimizerState,
                  3);
          return setup.slowHost() ? new SlowHost(opt) : opt;
        },
        2,
        setup.clipNorm(),
        speculative,
        b,
        s,
        dev.ramtrain.trainer.dist.DataParallel.single());
  }

  /** Delays every range update by up to 15 ms (seeded), then runs it. */
  private record SlowHost(HostOptimizer inner) implements HostOptimizer {
    private static final java.util.SplittableRandom RANDOM = new java.util.SplittableRandom(8);

    @Override
    public HostUpdate beginStep(float lr) {
      HostUpdate step = inner.beginStep(lr);
      return (from, to) -> {
        long nanos;
        synchronized (RANDOM) {
          nanos = RANDOM.nextLong(15_000_000);
        }
        java.util.concurrent.locks.LockSupport.parkNanos(nanos);
        step.update(from, to);
      };
    }

    @Override
    public ParamGroups groups() {
      return inner.groups();
    }

    @Override
    public int steps() {
      return inner.steps();
    }

    @Override
    public void resumeAt(int steps) {
      inner.resumeAt(steps);
    }

    @Override
    public List<HostBuffer> state() {
      return inner.state();
    }

    @Override
    public int stateBytesPerValue() {
      return inner.stateBytesPerValue();
    }

    @Override
    public void close() {
      inner.close();
    }
  }

  /** What a run ends with: every saved tensor and optimizer slab, flattened in a fixed order. */
  private record Final(float[] weights, float[] optimizerState) {}

  private static Final flatten(Checkpoints.Snapshot snap) {
    List<Safetensors.Tensor> tensors = new java.util.ArrayList<>(snap.weights());
    tensors.addAll(snap.averaged()); // --ema's, after the weights
    int n = tensors.stream().mapToInt(t -> t.values().length).sum();
    float[] w = new float[n];
    int at = 0;
    for (Safetensors.Tensor t : tensors) {
      System.arraycopy(t.values(), 0, w, at, t.values().length);
      at += t.values().length;
    }
    int m = snap.optimizerState().stream().mapToInt(v -> (int) v.count()).sum();
    float[] o = new float[m];
    at = 0;
    for (Safetensors.Values slab : snap.optimizerState()) {
      System.arraycopy(slab.toArray(), 0, o, at, (int) slab.count());
      at += (int) slab.count();
    }
    return new Final(w, o);
  }

  /**
   * Steps [from, to) of a run: each step's inputs come from a generator seeded by the step, so a
   * resumed run sees the same batches. {@code resumeFrom}: a checkpoint to restore first; {@code
   * saveTo}: where to save one after the last step. Checks that no step after the first allocates
   * device or host memory.
   */
  private Final run(Setup setup, int from, int to, Path resumeFrom, Path saveTo)
      throws IOException {
    redone.clear();
    try (Backend b = open(setup.bus())) {
      Stream s = b.createStream("compute");
      int in = net.shape().bytes();
      try (Learner learner = learner(setup, b, s);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) BATCH * in);
          DeviceBuffer labels = b.allocate("labels", DType.I32, BATCH);
          HostBuffer inputs = b.allocateHost("inputs", x.bytes());
          HostBuffer staging = b.allocateHost("labels", 4L * BATCH);
          CrossEntropyLoss loss = new CrossEntropyLoss(b, BATCH, learner.outputSize(), 0.1f)) {
        Checkpoints.Loaded resumed = resumeFrom != null ? Checkpoints.load(resumeFrom) : null;
        if (resumed != null) {
          learner.restore(resumed, s);
        }
        if (emaDecay > 0) {
          learner.averageWeights(new EmaDecay(emaDecay, true), resumed, s);
        }
        long deviceBytes = -1;
        long hostAllocations = -1;
        for (int step = from; step < to; step++) {
          Random rng = new Random(17 + step);
          float[] values = new float[(int) x.count()];
          for (int i = 0; i < values.length; i++) {
            values[i] = (float) rng.nextGaussian();
          }
          if (step == poisonedStep) {
            values[0] = Float.NaN;
          }
          s.synchronize(); // the previous step has read x and labels
          inputs.asByteBuffer().asFloatBuffer().put(values);
          b.copy(inputs, 0, x, x.bytes(), s);
          for (int i = 0; i < BATCH; i++) {
            staging.asByteBuffer().asIntBuffer().put(i, rng.nextInt(learner.outputSize()));
          }
          b.copy(staging, 0, labels, 4L * BATCH, s);
          learner.beginStep(s, step);
          DeviceBuffer logits = learner.forward(s, x, BATCH, true);
          learner.backwardAndUpdate(s, loss.compute(s, logits, labels, BATCH), BATCH, 1e-2f);
          Object clipRedone = learner.stepMetrics(s).get("clip_redone");
          if (clipRedone != null) {
            redone.add(clipRedone.equals(1));
          }
          if (step > from && !(learner instanceof Reference)) {
            assertEquals(deviceBytes, b.allocatedBytes(), "no device allocation in a step");
            assertEquals(hostAllocations, b.hostAllocations(), "no host allocation in a step");
          }
          deviceBytes = b.allocatedBytes();
          hostAllocations = b.hostAllocations();
        }
        Checkpoints.Snapshot snap = learner.snapshot(s);
        if (saveTo != null) {
          Checkpoints.save(saveTo, 1, to, snap, Map.of());
        }
        return flatten(snap);
      }
    }
  }

  private Final run(Setup setup) throws IOException {
    return run(setup, 0, 4, null, null);
  }

  private static void assertSameRun(Final expected, Final actual, String what) {
    assertArrayEquals(expected.weights(), actual.weights(), what + ": weights and buffers");
    assertArrayEquals(
        expected.optimizerState(), actual.optimizerState(), what + ": optimizer state");
  }

  @Test
  void adamWLayerByLayerOnTheHostEndsWithTheResidentRunBitForBit() throws IOException {
    Setup resident = Setup.resident();
    Final expected = run(resident);
    assertSameRun(expected, run(resident.offloaded(Set.of(), 2)), "optimizer offload alone");
    assertSameRun(
        expected, run(resident.offloaded(Set.of("conv1", "fc1"), 1)), "two streamed, depth 1");
    assertSameRun(expected, run(resident.offloaded(ALL, 3)), "all streamed, depth 3");
    // Recomputed forwards: the same gradients, batch-norm statistics updated once, same dropout.
    assertSameRun(
        expected,
        run(resident.offloaded(Set.of("conv2", "fc1"), 2).checkpointed()),
        "activation checkpointing");
  }

  /**
   * --ema, warmed up: the host's average of an offloaded run's masters, each layer's moved right
   * after its update (on a slow host thread too), with the buffers' average on the device, ends
   * where the resident run's device average ends, bit for bit; and a run resumed from a checkpoint
   * goes on from the average it saved, its warm-up where the checkpoint's steps left it.
   */
  @Test
  void theWeightsMovingAverageMatchesResidentBitForBitAndResumes(@TempDir Path dir)
      throws IOException {
    emaDecay = 0.9f;
    Final expected = run(Setup.resident());
    assertSameRun(expected, run(Setup.resident().offloaded(ALL, 2)), "streamed");
    assertSameRun(
        expected,
        run(Setup.resident().offloaded(Set.of("conv1", "fc1"), 1).withSlowHost()),
        "slow");
    run(Setup.resident().offloaded(ALL, 2), 0, 2, null, dir);
    Path saved = dir.resolve("checkpoints/epoch-0001");
    assertTrue(Files.exists(saved.resolve(Checkpoints.AVERAGED)), "the average is saved");
    assertSameRun(expected, run(Setup.resident(), 2, 4, saved, null), "resumed after step 2");
  }

  /**
   * A two-block ViT (patch convolution, class token and position embedding, attention and MLP
   * residuals, final norm, class-token pooling, head) streamed block by block, with activation
   * checkpointing too: the resident run's weights and AdamW state, bit for bit.
   */
  @Test
  void aVisionTransformerStreamedBlockByBlockEndsWithTheResidentRunBitForBit() throws IOException {
    net = new Net("vit:4-16-2-2-3", new ImageShape(8, 8, 3));
    Setup resident = Setup.resident();
    Final expected = run(resident);
    Set<String> blocks =
        Set.of(
            "blocks.0.attn_path", "blocks.0.mlp_path", "blocks.1.attn_path", "blocks.1.mlp_path");
    assertSameRun(expected, run(resident.offloaded(blocks, 2)), "blocks streamed, depth 2");
    Set<String> everything = new java.util.HashSet<>(blocks);
    everything.addAll(Set.of("patch_embed.proj", "embed", "norm", "head"));
    assertSameRun(
        expected,
        run(resident.offloaded(everything, 1).checkpointed()),
        "everything streamed, checkpointed");
  }

  /**
   * Fine-tuning's parameter groups (timm's layer decay 0.75, no decay on biases, norms and the
   * embeddings, block 0 frozen) give the same bits whether the optimizer runs on the device over
   * the resident slab or on the host over the streamed layout, for AdamW and SGD.
   */
  @Test
  void layerDecayWeightDecayGroupsAndFrozenBlocksMatchResidentBitForBit() throws IOException {
    net = new Net("vit:4-16-2-2-3", new ImageShape(8, 8, 3));
    groups = new ParamGroups.Rules(0.75f, true, "blocks\\.0\\..*");
    Set<String> streamed = Set.of("blocks.0.attn_path", "blocks.1.mlp_path", "head");
    Final expected = run(Setup.resident());
    assertSameRun(expected, run(Setup.resident().offloaded(streamed, 2)), "adamw, groups");
    Setup sgd = Setup.resident().withSgd();
    assertSameRun(run(sgd), run(sgd.offloaded(streamed, 1)), "sgd, groups");
    Setup clipped = Setup.resident().clipped(0.05f); // the frozen block out of the norm
    assertSameRun(run(clipped), run(clipped.offloaded(streamed, 2)), "clipped, groups");
  }

  @Test
  void clippedAndSgdRunsMatchTooBitForBit() throws IOException {
    Setup clipped = Setup.resident().clipped(0.05f);
    assertSameRun(run(clipped), run(clipped.offloaded(Set.of("conv2", "fc2"), 2)), "clipped");
    Setup sgd = Setup.resident().withSgd();
    assertSameRun(run(sgd), run(sgd.offloaded(ALL, 1)), "sgd with Nesterov momentum");
  }

  /**
   * The speculative clipped update (each layer updated as its gradient lands, the step redone from
   * the kept state when the norm says clip) ends with the resident clipped run's weights, moving
   * average and optimizer state bit for bit: clipping every step (every step redone), never (none
   * redone), with fine-tuning's groups and a frozen block, SGD, a slow host thread, streamed
   * layers; and a step whose gradients are not finite is redone and ends as the serial update does.
   */
  @Test
  void speculativeClippedUpdatesEndWithTheSerialUpdatesBits() throws IOException {
    speculative = true;
    emaDecay = 0.9f;
    Setup clipped = Setup.resident().clipped(0.05f);
    Final expected = run(clipped);
    assertSameRun(expected, run(clipped.offloaded(Set.of("conv2", "fc2"), 2)), "clipped");
    assertEquals(List.of(true, true, true, true), redone, "a norm of 0.05 clips every step");
    assertSameRun(
        expected, run(clipped.offloaded(ALL, 1).withSlowHost()), "clipped, slow host, streamed");
    Setup loose = Setup.resident().clipped(1e9f);
    assertSameRun(run(loose), run(loose.offloaded(Set.of("conv1"), 2)), "never clipped");
    assertEquals(List.of(false, false, false, false), redone, "no step redone");
    Setup sgd = Setup.resident().withSgd().clipped(0.05f);
    assertSameRun(run(sgd), run(sgd.offloaded(ALL, 2)), "sgd, clipped");
    emaDecay = 0;
    net = new Net("vit:4-16-2-2-3", new ImageShape(8, 8, 3));
    groups = new ParamGroups.Rules(0.75f, true, "blocks\\.0\\..*");
    Setup vit = Setup.resident().clipped(0.05f); // the frozen block out of the norm
    assertSameRun(run(vit), run(vit.offloaded(Set.of("blocks.1.mlp_path", "head"), 2)), "groups");
    net = CNN;
    groups = ParamGroups.Rules.NONE;
    poisonedStep = 2;
    Setup poisoned = Setup.resident().clipped(1e9f);
    speculative = false;
    Final serial = run(poisoned.offloaded(Set.of("conv2"), 2));
    speculative = true;
    assertSameRun(serial, run(poisoned.offloaded(Set.of("conv2"), 2)), "a NaN step");
    assertEquals(List.of(false, false, true, true), redone, "the NaN step redone, and after");
  }

  /**
   * Random delays of up to 2 ms on every copy change when each copy finishes, not the order the
   * events impose: the result stays exact.
   */
  @Test
  void randomCopyDelaysDoNotChangeTheResult() throws IOException {
    Final expected = run(Setup.resident());
    assertSameRun(
        expected,
        run(Setup.resident().offloaded(Set.of("conv2", "fc1"), 2).withSlowHost()),
        "slow host");
    for (long seed = 1; seed <= 3; seed++) {
      SimulatedBus jitter = new SimulatedBus(0, 2_000_000, seed);
      Setup delayed = Setup.resident().over(jitter);
      assertSameRun(expected, run(delayed.offloaded(ALL, (int) seed)), "jitter seed " + seed);
      assertSameRun(
          expected, run(delayed.offloaded(Set.of("conv2", "fc2"), 2)), "partial, seed " + seed);
      assertSameRun(
          expected, run(delayed.offloaded(ALL, 1).checkpointed()), "checkpointed, seed " + seed);
    }
  }

  /**
   * bf16 slots: the streamed layers compute from bf16-rounded weights while masters, gradients and
   * the update stay fp32 (the documented exception to exactness with resident training). The run
   * equals, bit for bit, a resident one that rounds those layers' weights to bf16 for each step's
   * forward and backward and restores the fp32 masters for the update; random copy delays change
   * nothing.
   */
  @Test
  void bf16SlotsStayCloseToTheResidentRunAndAreOrderedByEventsToo() throws IOException {
    Set<String> streamed = Set.of("conv2", "fc1", "fc2");
    Setup bf16 = Setup.resident().offloaded(streamed, 2).withBf16Slots();
    Final rounded = run(bf16);
    assertSameRun(run(Setup.referenceFor(bf16)), rounded, "bf16 slots vs the reference");
    assertTrue(
        !java.util.Arrays.equals(run(Setup.resident()).weights(), rounded.weights()),
        "bf16 weights change the result");
    for (long seed = 1; seed <= 2; seed++) {
      SimulatedBus jitter = new SimulatedBus(0, 2_000_000, seed);
      assertSameRun(rounded, run(bf16.over(jitter)), "bf16 slots, jitter seed " + seed);
      assertSameRun(
          run(bf16.offloaded(Set.of("conv1", "conv2", "fc1", "fc2"), 1)),
          run(bf16.offloaded(Set.of("conv1", "conv2", "fc1", "fc2"), 1).over(jitter)),
          "bf16, all streamed through one slot, jitter seed " + seed);
    }
  }

  /**
   * The host AdamW writes the bf16 copies of what it updates in its own pass: after each layer's
   * update as gradients land, after a serial clipped update of the whole slab, and after a
   * speculative step redone from its kept copy. A norm that never clips must leave the serial
   * path's bits those of the unclipped run (which the reference pins above), and the redone steps
   * those of the serial ones.
   */
  @Test
  void bf16CopiesWrittenByTheUpdateMatchOnEveryUpdatePath() throws IOException {
    Setup bf16 = Setup.resident().offloaded(Set.of("conv2", "fc1", "fc2"), 2).withBf16Slots();
    Final unclipped = run(bf16);
    assertSameRun(run(Setup.referenceFor(bf16)), unclipped, "bf16 slots vs the reference");
    speculative = false;
    assertSameRun(unclipped, run(bf16.clipped(1e9f)), "serial update, never clipping");
    Final serial = run(bf16.clipped(0.05f));
    speculative = true;
    assertSameRun(serial, run(bf16.clipped(0.05f)), "every step redone from the kept copy");
    assertEquals(List.of(true, true, true, true), redone, "a norm of 0.05 clips every step");
    assertSameRun(serial, run(bf16.clipped(0.05f).withSlowHost()), "redone, slow host");
  }

  /**
   * bf16 moments (ramtrain.offload.optimizer-state = bf16): stochastically rounded from bits
   * counted per element, so the run does not depend on the placement, the copies' timing or the
   * host's pace; checkpoints keep them as fp32 values, which a resumed run narrows back exactly.
   */
  @Test
  void bf16MomentsDoNotDependOnPlacementOrTimingAndResumeExactly(@TempDir Path dir)
      throws IOException {
    Setup streamed = Setup.resident().offloaded(Set.of("conv1", "fc1", "fc2"), 2);
    Final fp32 = run(streamed);
    optimizerState = OffloadSpec.OptimizerState.BF16;
    Final bf16 = run(streamed);
    assertTrue(!java.util.Arrays.equals(fp32.weights(), bf16.weights()), "bf16 moments differ");
    for (float v : bf16.optimizerState()) {
      assertEquals(v, Bf16.toFloat(Bf16.fromFloat(v)), "every moment is a bf16 value");
    }
    assertSameRun(bf16, run(streamed.offloaded(ALL, 1)), "everything streamed");
    assertSameRun(bf16, run(streamed.offloaded(Set.of(), 1)), "nothing streamed");
    assertSameRun(bf16, run(streamed.withSlowHost()), "slow host");
    assertSameRun(bf16, run(streamed.over(new SimulatedBus(0, 2_000_000, 6))), "random delays");
    run(streamed, 0, 2, null, dir.resolve("bf16"));
    Path saved = dir.resolve("bf16/checkpoints/epoch-0001");
    assertSameRun(bf16, run(streamed, 2, 4, saved, null), "resumed");
    speculative = true;
    Setup clipped = streamed.clipped(0.05f);
    Final clippedRun = run(clipped);
    speculative = false;
    assertSameRun(clippedRun, run(clipped), "speculative and serial clipped steps");
  }

  /**
   * A delayed update (ZeRO-Offload's DPU): each step computes with the weights from before the
   * previous step's update, which runs on the host beside it. Equal, bit for bit, to the plain
   * reference of that rule, with or without bf16 slots and checkpointing, whatever the copy timing.
   */
  @Test
  void aDelayedUpdateComputesWithWeightsOneUpdateOld() throws IOException {
    Setup delayed = Setup.resident().offloaded(Set.of("conv2", "fc1"), 2).delayedFrom(0);
    Final result = run(delayed);
    assertSameRun(run(Setup.referenceFor(delayed)), result, "delayed update vs the reference");
    assertTrue(
        !java.util.Arrays.equals(run(Setup.resident()).weights(), result.weights()),
        "a delayed update is not the resident run");
    assertSameRun(
        result, run(delayed.over(new SimulatedBus(0, 2_000_000, 4))), "delayed, random delays");
    assertSameRun(result, run(delayed.withSlowHost()), "delayed, slow host updates");
    Setup everything =
        Setup.resident().offloaded(ALL, 1).withBf16Slots().checkpointed().delayedFrom(2);
    assertSameRun(
        run(Setup.referenceFor(everything)),
        run(everything.over(new SimulatedBus(0, 2_000_000, 5))),
        "delayed, bf16 slots, checkpointed, random delays");
    // Clipped: the whole slab clipped and updated after backward, beside the next forward.
    for (float norm : new float[] {0.05f, 1e9f}) {
      Setup clipped = delayed.clipped(norm);
      Final expected = run(Setup.referenceFor(clipped));
      assertSameRun(expected, run(clipped), "delayed, clipped at " + norm);
      assertSameRun(expected, run(clipped.withSlowHost()), "delayed, clipped, slow host");
      assertTrue(
          !java.util.Arrays.equals(
              run(Setup.resident().offloaded(Set.of("conv2", "fc1"), 2).clipped(norm)).weights(),
              expected.weights()),
          "a delayed clipped run is not the undelayed one");
    }
    Setup clippedLater = everything.clipped(0.05f);
    assertSameRun(
        run(Setup.referenceFor(clippedLater)),
        run(clippedLater.over(new SimulatedBus(0, 2_000_000, 7))),
        "delayed from step 2, clipped, bf16 slots, checkpointed, random delays");
  }

  @Test
  void aStreamedRunResumesFromItsCheckpointAndFromAResidentOne(@TempDir Path dir)
      throws IOException {
    Setup resident = Setup.resident();
    Setup streamed = resident.offloaded(Set.of("conv1", "fc1", "fc2"), 2);
    Final straight = run(resident);
    run(streamed, 0, 2, null, dir.resolve("streamed"));
    Path saved = dir.resolve("streamed/checkpoints/epoch-0001");
    assertSameRun(straight, run(streamed, 2, 4, saved, null), "streamed, resumed");
    assertSameRun(straight, run(resident, 2, 4, saved, null), "resident from a streamed one");
    run(resident, 0, 2, null, dir.resolve("resident"));
    assertSameRun(
        straight,
        run(streamed, 2, 4, dir.resolve("resident/checkpoints/epoch-0001"), null),
        "streamed from a resident one");
  }

  @Test
  void stepMetricsCountEveryByteThatCrossed() throws IOException {
    try (Backend b = open(new SimulatedBus(2e9, 0, 0))) {
      Stream s = b.createStream("compute");
      Setup setup = Setup.resident().offloaded(Set.of("conv2", "fc1"), 1);
      try (Learner learner = learner(setup, b, s);
          DeviceBuffer x = b.allocate("x", DType.F32, (long) BATCH * net.shape().bytes());
          DeviceBuffer dy = b.allocate("dy", DType.F32, (long) BATCH * learner.outputSize())) {
        long params = learner.parameterCount();
        for (int step = 0; step < 2; step++) {
          learner.beginStep(s, step);
          learner.forward(s, x, BATCH, true);
          learner.backwardAndUpdate(s, dy, BATCH, 1e-3f);
          Map<String, Object> m = learner.stepMetrics(s);
          // Every gradient returns once. Weights in: streamed layers in forward, and in backward
          // those the single slot no longer holds (conv2: fc1 took its slot); resident layers
          // re-uploaded after the previous step's update.
          OffloadedLearner offloaded = (OffloadedLearner) learner;
          long streamedIn = offloaded.network().layerParameters("conv2") * 2;
          streamedIn += offloaded.network().layerParameters("fc1");
          long residentIn =
              step == 0
                  ? 0
                  : params
                      - offloaded.network().layerParameters("conv2")
                      - offloaded.network().layerParameters("fc1");
          assertEquals(4 * params, m.get("d2h_bytes"), "gradients out");
          assertEquals(4 * (streamedIn + residentIn), m.get("h2d_bytes"), "weights in");
          double overlap = (double) m.get("overlap");
          assertTrue(overlap >= 0 && overlap <= 1, "overlap " + overlap);
          assertTrue((double) m.get("copy_in_ms") > 0 && (double) m.get("compute_ms") > 0);
        }
      }
    }
  }

  /**
   * What bf16 slots and a delayed update compute, the plain way: a resident model keeps fp32
   * masters W and the weights the step computes with, P, on the host; forward and backward run on P
   * (the streamed layers rounded to bf16 with bf16 slots); the update runs on W; then P becomes W,
   * or with a delayed update the W from before this update, so the next step computes with weights
   * one update old.
   */
  private static final class Reference implements Learner {
    private final Backend backend;
    private final Model model;
    private final Optimizer optimizer;
    private final Streaming how;
    private final float clipNorm;
    private final DeviceBuffer gradNorm;
    private float[] masters;
    private float[] published;
    private long step;

    Reference(Backend backend, Model model, Optimizer optimizer, Streaming how, float clipNorm) {
      this.backend = backend;
      this.model = model;
      this.optimizer = optimizer;
      this.how = how;
      this.clipNorm = clipNorm;
      this.gradNorm = backend.allocate("reference.norm", DType.F32, 1);
    }

    @Override
    public Model network() {
      return model;
    }

    @Override
    public DeviceBuffer buffers() {
      return model.parameters().buffers();
    }

    @Override
    public long parameterCount() {
      return model.parameters().count();
    }

    @Override
    public void continueStep(Stream compute, long dropoutSeed) {
      throw new UnsupportedOperationException("the reference does not accumulate");
    }

    @Override
    public void accumulate(Stream compute, DeviceBuffer dlogits, int batch) {
      throw new UnsupportedOperationException("the reference does not accumulate");
    }

    @Override
    public void beginStep(Stream compute, long step) {
      model.zeroGrad(compute);
      model.beginStep(step);
      this.step = step;
    }

    @Override
    public DeviceBuffer forward(Stream compute, DeviceBuffer x, int batch, boolean training) {
      if (masters == null) {
        masters = Checkpoints.download(backend, compute, model.parameters().values());
        published = masters.clone();
      }
      float[] used = published.clone();
      for (var e : model.parameters().entries()) {
        String layer = e.spec().name().substring(0, e.spec().name().indexOf('.'));
        if (how.bf16Weights() && how.streamed().contains(layer)) {
          for (long i = e.offset(); i < e.offset() + e.spec().count(); i++) {
            used[(int) i] = Bf16.toFloat(Bf16.fromFloat(used[(int) i]));
          }
        }
      }
      Checkpoints.upload(backend, compute, model.parameters().values(), used);
      return model.forward(compute, x, batch, training);
    }

    @Override
    public void backwardAndUpdate(Stream compute, DeviceBuffer dlogits, int batch, float lr) {
      model.backward(compute, dlogits, batch);
      if (how.bf16Weights()) { // streamed layers' gradients cross the bus in bf16 too
        DeviceBuffer grads = model.parameters().grads();
        float[] g = Checkpoints.download(backend, compute, grads);
        for (var e : model.parameters().entries()) {
          String layer = e.spec().name().substring(0, e.spec().name().indexOf('.'));
          if (how.streamed().contains(layer)) {
            for (long i = e.offset(); i < e.offset() + e.spec().count(); i++) {
              g[(int) i] = Bf16.toFloat(Bf16.fromFloat(g[(int) i]));
            }
          }
        }
        Checkpoints.upload(backend, compute, grads, g);
      }
      if (clipNorm > 0) { // as the resident learner clips
        backend.run(
            compute,
            new dev.ramtrain.trainer.backend.ops.ClipGradNorm(
                model.parameters().grads(), clipNorm, gradNorm));
      }
      float[] before = masters;
      Checkpoints.upload(backend, compute, model.parameters().values(), masters);
      optimizer.step(compute, model.parameters(), lr);
      masters = Checkpoints.download(backend, compute, model.parameters().values());
      boolean late = how.delayedUpdate() && step >= how.delayWarmupSteps();
      published = late ? before : masters.clone();
    }

    @Override
    public Map<String, Object> stepMetrics(Stream compute) {
      return Map.of();
    }

    @Override
    public Checkpoints.Snapshot snapshot(Stream compute) {
      return Checkpoints.snapshot(model, optimizer, backend, compute);
    }

    @Override
    public void restore(Checkpoints.Loaded checkpoint, Stream compute) {
      throw new UnsupportedOperationException();
    }

    @Override
    public void close() {
      gradNorm.close();
      optimizer.close();
      model.close();
    }
  }
}
