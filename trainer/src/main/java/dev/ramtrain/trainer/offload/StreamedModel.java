package dev.ramtrain.trainer.offload;

import dev.ramtrain.random.Seeds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.nn.GradientSlots;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.Network;
import dev.ramtrain.trainer.nn.ParameterSource;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.nn.Workspace;
import dev.ramtrain.trainer.optim.ParamGroups;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A model whose master weights and gradients live in pinned host memory, with some layers resident
 * on the device and the others streamed through a fixed ring of weight slots (see
 * docs/architecture.md, "Offload"). Its parts: {@link HostLayout} (where each parameter lives),
 * {@link HostSlabs} (masters, gradients, bf16 and published copies), {@link WeightRing} (slots,
 * loads), {@link GradientReturn} (gradient slots, copies to the host), {@link HostUpdateQueue} (the
 * host optimizer's thread). This class is the schedule that orders them, top to bottom below.
 *
 * <p>Forward and backward enqueue, in program order and without blocking: each slot's load on the
 * copy-in stream after the slot's previous use, each layer's compute after its load, and each
 * layer's gradient (streamed or resident) back to the host slab on the copy-out stream as soon as
 * that layer's backward is done. A {@link HostUpdate} given to backward then runs on a host thread
 * for each layer whose gradient has landed, while the device goes on with earlier layers; the next
 * forward waits for those updates before it loads any weights.
 *
 * <p>With bf16 slots the layers compute in fp32 from bf16-rounded weights; masters and gradients
 * stay fp32. With activation checkpointing ({@link ActivationCheckpoints}) forward keeps only each
 * layer's output and backward recomputes a layer's forward from it right before its backward. With
 * a delayed update (ZeRO-Offload's DPU) loads and uploads read the published copy, which each
 * layer's update task refreshes from the masters just before updating them: the next step starts
 * once every layer is published and computes with the weights from before this step's update, which
 * runs beside its forward (its backward, which refills the gradient slab the updates read, waits
 * for them).
 */
public final class StreamedModel implements Network, AutoCloseable {
  private final long[] parts; // the layers' boundaries in the host slabs, computed once
  private final String spec;
  private final Backend backend;
  private final List<Layer> layers;
  private final HostLayout layout;
  private final HostSlabs slabs;
  private final Parameters resident; // resident layers' values and gradients, every buffer
  private final Workspace workspace; // the layers' shared scratch
  private final GradientSlots gradientSlots; // the input gradients inside composite layers
  private final StepTimeline timeline;
  private final WeightRing ring;
  private final GradientReturn gradients;
  private final HostUpdateQueue updates = new HostUpdateQueue();
  private final Event[] uploaded; // per resident layer: its new weights are on the device
  private final boolean[] mastersChanged; // per layer: updated on the host since last uploaded
  private final boolean[] awaitUpload; // per resident layer: forward must wait for uploaded[i]
  private final boolean delayable; // delayed updates: loads read the published weights
  private final long delayFromStep;
  private boolean delayThisStep; // the update begun by this step's backward runs late
  private boolean pendingDelayed; // the pending updates were begun delayed
  private Event lastLanding; // the last gradient the last backward sent to the host
  private long delayedWaitNanos; // how long the last backward waited for a delayed update
  private final CompletableFuture<?>[] slotReleased =
      new CompletableFuture<?>[HostSlabs.LANDING_SLOTS]; // ZeRO-2: each slot's last reduction
  private ActivationCheckpoints checkpoints; // null: every layer keeps its own activations
  private boolean servesOtherDevices; // a node's device 0: its host copy is its other devices' too
  private final int maxBatch;
  private final long seed;

  /**
   * Lays out the model's layers (unbound), initializes the host masters from its seed as a resident
   * model would, uploads the resident layers and binds every layer.
   */
  public StreamedModel(ModelBlueprint config, Streaming how, Backend backend, Stream stream) {
    this(config, how, backend, stream, null);
  }

  /**
   * As above; with a {@code gradientShare} (ZeRO-2: the share [from, to) of the model's parameter
   * count the host keeps the gradients of) each layer's gradient lands in a slot from where the
   * update given to {@link #backward} reduces it ({@link #landed}); null keeps them all.
   */
  public StreamedModel(
      ModelBlueprint config,
      Streaming how,
      Backend backend,
      Stream stream,
      java.util.function.LongFunction<long[]> gradientShare) {
    this(config, how, backend, stream, gradientShare, null);
  }

  /**
   * As above; with {@code first} (a node's other device, {@link DeviceGroup}) the masters and their
   * copies are {@code first}'s, initialized and written there only, and each layer's gradient lands
   * in a slot of this model's own, from where the update given to {@link #backward} hands it on.
   */
  StreamedModel(
      ModelBlueprint config,
      Streaming how,
      Backend backend,
      Stream stream,
      java.util.function.LongFunction<long[]> gradientShare,
      HostSlabs first) {
    this.spec = config.spec();
    this.backend = backend;
    this.layers = List.copyOf(config.layers().get());
    this.maxBatch = config.maxBatch();
    this.seed = config.seed();
    this.layout = new HostLayout(spec, layers, how.streamed());
    int n = layers.size();
    boolean bf16 = how.bf16Weights() && layout.streamedCount() > 0;
    this.delayable = how.delayedUpdate();
    this.delayFromStep = how.delayWarmupSteps();
    this.slabs =
        first != null
            ? HostSlabs.sharing(backend, first)
            : new HostSlabs(
                backend,
                layout,
                bf16,
                delayable,
                true,
                gradientShare == null ? null : gradientShare.apply(layout.parameters()));
    // From here on, whatever fails (a pretrained tensor of the wrong size, a device allocation the
    // budget refuses, a layer that cannot bind) closes what was made: the pinned slabs are
    // gigabytes, and the caller (a notebook) may go on.
    try {
      if (slabs.owner()) {
        Parameters.writeInitialValues(
            layout.entries(),
            seed,
            config.pretrained(),
            e -> slabs.masters().floats(e.offset(), e.spec().count()));
      }
      this.parts =
          java.util.stream.LongStream.concat(
                  java.util.stream.LongStream.of(0),
                  java.util.stream.IntStream.range(0, layout.layers())
                      .filter(i -> layout.count(i) > 0)
                      .mapToLong(i -> layout.offset(i) + layout.count(i)))
              .toArray();
      this.resident = Parameters.allocate(backend, layout.residentParameters(), layout.buffers());
      this.workspace = Workspace.forLayers(backend, layers, maxBatch);
      this.gradientSlots = GradientSlots.forLayers(backend, layers, maxBatch);
      this.timeline = new StepTimeline(backend, 3 * n + 2);
      this.ring = new WeightRing(backend, layout, slabs, how.prefetchDepth(), timeline);
      this.gradients = new GradientReturn(backend, layout, slabs, resident, timeline);
      this.uploaded = new Event[n];
      for (int i = 0; i < n; i++) {
        uploaded[i] = backend.createEvent("resident.uploaded." + i);
      }
      this.mastersChanged = new boolean[n];
      this.awaitUpload = new boolean[n];
      // Resident values and buffers start as a resident model's would: the same seeded (or
      // pretrained) values.
      resident.initialize(backend, stream, seed, config.pretrained());
      for (int i = 0; i < n; i++) {
        slabs.refreshCopies(i);
      }
      if (how.activationCheckpointing()) { // a second copy of the layers sizes the shared arena
        checkpoints =
            new ActivationCheckpoints(
                backend, layers, config.layers().get(), this::sharedSource, maxBatch);
      }
      for (int i = 0; i < n; i++) {
        Layer layer = layers.get(i);
        layer.bind(
            backend,
            checkpoints != null ? checkpoints.source(sharedSource(i)) : sharedSource(i),
            maxBatch);
        if (!layout.streamed(i) && layout.count(i) > 0) {
          backend.copy(
              slabs.masters(),
              4 * layout.offset(i),
              residentValues(i),
              4 * layout.count(i),
              stream);
        }
      }
      stream.synchronize();
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** Layer i's device views, with the layers' shared workspace and gradient slots. */
  private ParameterSource sharedSource(int i) {
    return source(i).sharing(workspace, gradientSlots).topLevelGradientIn(i);
  }

  /** The device views layer i binds to: resident slabs, or its fixed slots. */
  private ParameterSource source(int i) {
    int j = layout.ordinal(i);
    if (j < 0) {
      return resident;
    }
    long base = layout.offset(i);
    DeviceBuffer weights = ring.weightsOf(j);
    DeviceBuffer grads = gradients.slotOf(j);
    return new ParameterSource() {
      @Override
      public DeviceBuffer value(String name) {
        Parameters.Entry e = layout.entry(name);
        return weights.view(e.offset() - base, e.spec().count());
      }

      @Override
      public DeviceBuffer grad(String name) {
        Parameters.Entry e = layout.entry(name);
        return grads.view(e.offset() - base, e.spec().count());
      }

      @Override
      public DeviceBuffer buffer(String name) {
        return resident.buffer(name);
      }
    };
  }

  /** Resident layer i's parameters in the resident slab (one contiguous range). */
  private DeviceBuffer residentValues(int i) {
    return resident.values().view(layout.residentAt(i), layout.count(i));
  }

  @Override
  public String spec() {
    return spec;
  }

  @Override
  public int inputSize() {
    return layers.get(0).inputSize();
  }

  @Override
  public int outputSize() {
    return layers.get(layers.size() - 1).outputSize();
  }

  @Override
  public int maxBatch() {
    return maxBatch;
  }

  /** Parameters in all (resident and streamed): the length of the host slabs. */
  public int parameterCount() {
    return (int) layout.parameters();
  }

  /** Parameters of the top-level layer {@code name}. */
  public long layerParameters(String name) {
    for (int i = 0; i < layers.size(); i++) {
      if (layers.get(i).name().equals(name)) {
        return layout.count(i);
      }
    }
    throw new IllegalArgumentException("no layer " + name);
  }

  /** The parameters in the host slabs, in their order, for the optimizer's groups. */
  public ParamGroups.Layout layout() {
    return ParamGroups.Layout.whole(layout.entries());
  }

  /**
   * The host slabs cut at the layers' boundaries, [parts[k], parts[k + 1]) each a layer's
   * parameters, from 0 to {@link #parameterCount()}: how whole-slab collectives and copies go over
   * a slab larger than one Java buffer views, a layer (under 2 GiB) at a time.
   */
  public long[] parts() {
    return parts.clone();
  }

  /** The fp32 master weights in model order (the resident slab's layout), in pinned memory. */
  public HostBuffer masters() {
    return slabs.masters();
  }

  /** The host slabs, for a node's other devices to share ({@link DeviceGroup}). */
  HostSlabs slabs() {
    return slabs;
  }

  /** Every parameter's gradient in model order once {@link #awaitGradients} returns. */
  public HostBuffer hostGradients() {
    return slabs.gradients();
  }

  /** Where each parameter lives in the host slabs. */
  public List<Parameters.Entry> entries() {
    return layout.entries();
  }

  /** Buffers (batch-norm statistics): always resident. */
  public Parameters residentSlabs() {
    return resident;
  }

  // ---- the schedule ---------------------------------------------------------------------------

  /**
   * Starts a training step: zeroes the resident gradients once their last copies have left, and
   * seeds the layers that draw random numbers (as {@code Model.beginStep}).
   */
  public void beginStep(Stream compute, long step) {
    timeline.reset();
    delayThisStep = delayable && step >= delayFromStep;
    for (int i = 0; i < layers.size(); i++) {
      if (!layout.streamed(i) && layout.count(i) > 0) {
        compute.waitFor(gradients.onHost(i)); // the previous step's copy has read the slab
      }
    }
    backend.run(compute, new Fill(resident.grads(), 0f)); // streamed ones are zeroed in their slot
    long stepSeed = Seeds.mix(seed, step);
    layers.forEach(l -> l.beginStep(stepSeed));
  }

  @Override
  public DeviceBuffer forward(Stream compute, DeviceBuffer x, int batch, boolean training) {
    if (batch < 1 || batch > maxBatch) {
      throw new IllegalArgumentException("batch " + batch + " outside [1, " + maxBatch + "]");
    }
    publishUpdates(compute);
    if (training) {
      timeline.beginPass(compute);
      if (checkpoints != null) {
        checkpoints.input(x);
      }
    }
    DeviceBuffer h = x;
    for (int i = 0; i < layers.size(); i++) {
      int j = layout.ordinal(i);
      if (j >= 0) {
        ring.prepareForward(compute, i);
      } else if (awaitUpload[i]) {
        compute.waitFor(uploaded[i]);
        awaitUpload[i] = false;
      }
      int k = training ? timeline.begin(StepTimeline.Lane.COMPUTE, compute) : -1;
      h = layers.get(i).forward(compute, h, batch, training);
      if (checkpoints != null) {
        h = checkpoints.keep(compute, i, h, batch);
      }
      timeline.end(StepTimeline.Lane.COMPUTE, k, compute, 0);
      if (j >= 0) {
        ring.release(compute, j);
      }
    }
    return h;
  }

  /**
   * Backward from dL/dlogits. Every layer's gradient returns to the host slab as soon as its
   * backward is done; {@code given} (null: none) then runs for that layer's range on the host
   * optimizer thread, in the order gradients land.
   */
  public void backward(Stream compute, DeviceBuffer dlogits, int batch, HostUpdate given) {
    long waitFrom = System.nanoTime();
    updates.awaitAll(); // delayed ones read the gradient slab this backward refills
    delayedWaitNanos = pendingDelayed ? System.nanoTime() - waitFrom : 0;
    pendingDelayed = delayThisStep;
    timeline.beginPass(compute);
    DeviceBuffer g = dlogits;
    for (int i = layers.size() - 1; i >= 0; i--) {
      int j = layout.ordinal(i);
      if (j >= 0) {
        for (int ahead = j; ahead > Math.max(-1, j - ring.depth()); ahead--) {
          ring.load(ahead);
        }
        ring.use(compute, i);
        gradients.awaitSlot(compute, j); // its previous gradient has left
      }
      int k = timeline.begin(StepTimeline.Lane.COMPUTE, compute);
      if (j >= 0) {
        gradients.zeroSlot(compute, i);
      }
      if (checkpoints != null) {
        checkpoints.recompute(compute, i, batch);
      }
      g = layers.get(i).backward(compute, g, batch, i > 0);
      if (checkpoints != null && g != null) {
        g = checkpoints.keepGradient(compute, i, g, batch);
      }
      timeline.end(StepTimeline.Lane.COMPUTE, k, compute, 0);
      if (layout.count(i) > 0) {
        if (j >= 0) {
          ring.release(compute, j);
        }
        int slot = slabs.landingSlot(i);
        if (slot >= 0 && slotReleased[slot] != null) {
          slotReleased[slot].join(); // the layer that landed there last has been reduced
        }
        gradients.send(compute, i);
        if (given != null || slabs.landsBf16(i)) { // bf16 gradients are widened there too
          CompletableFuture<Void> done = scheduleUpdate(i, given);
          if (slot >= 0) {
            slotReleased[slot] = done;
          }
        }
      }
    }
  }

  /**
   * Runs {@code update} over layer i's range once its gradient is on the host, after widening a
   * bf16 gradient; {@code update} null: the widening alone (the masters and their copies stand).
   */
  private CompletableFuture<Void> scheduleUpdate(int i, HostUpdate update) {
    int from = (int) layout.offset(i);
    int to = (int) (layout.offset(i) + layout.count(i));
    HostUpdate landed =
        slabs.landsBf16(i)
            ? (a, b) -> {
              slabs.widenGradient(i);
              if (update != null) {
                update.update(a, b);
              }
            }
            : update;
    Runnable refresh = update == null ? () -> {} : () -> slabs.refreshCopies(i);
    CompletableFuture<Void> done =
        updates.submit(
            gradients.onHost(i), from, to, landed, delayThisStep && !servesOtherDevices, refresh);
    mastersChanged[i] |= update != null;
    lastLanding = gradients.onHost(i);
    return done;
  }

  /**
   * Where the gradient of parameters [from, to) (one layer's range, as an update given to {@link
   * #backward} receives it) has landed on the host: its place in the gradient slab, or (ZeRO-2) its
   * landing slot, which the next layer but one overwrites once that update has returned.
   */
  public ByteBuffer landed(int from, int to) {
    int i = layerAt(from);
    if (layout.offset(i) != from || layout.offset(i) + layout.count(i) != to) {
      throw new IllegalArgumentException("[" + from + ", " + to + ") is not one layer's range");
    }
    return slabs.landingOf(i).range(slabs.landingOffset(i), 4L * (to - from));
  }

  /** The layer with parameters whose range starts at {@code from}. */
  private int layerAt(int from) {
    for (int i = 0; i < layers.size(); i++) {
      if (layout.count(i) > 0 && layout.offset(i) == from) {
        return i;
      }
    }
    throw new IllegalArgumentException("no layer's parameters start at " + from);
  }

  /**
   * Says this model is a node's device 0, whose host copy the node's other devices load from: a
   * delayed step then refreshes a layer's copies after the update given to {@link #backward} (which
   * must only exchange gradients, the node's other devices' added once they are done with the
   * layer), so that no copy changes under another device still computing with it; the update itself
   * runs late, after backward ({@link #afterBackward}).
   */
  void servesOtherDevices() {
    servesOtherDevices = true;
  }

  /** Whether the update begun by this step's backward runs late (a delayed update). */
  public boolean delaysThisStep() {
    return delayThisStep;
  }

  /**
   * Runs {@code update} over the whole slab on the host optimizer thread after the updates the last
   * backward queued, once every gradient is on the host: a delayed step's clipped update, which the
   * next forward does not wait for (it reads the copies published before it).
   */
  public void afterBackward(HostUpdate update) {
    if (!delayThisStep || lastLanding == null) {
      throw new IllegalStateException("an update after backward is a delayed step's, after one");
    }
    updates.submit(lastLanding, 0, (int) layout.parameters(), update, true, () -> {});
  }

  /**
   * Waits for every host update begun by backward, then enqueues the uploads of resident layers
   * whose masters changed and forgets what the weight slots held: loads read the new masters. The
   * next forward does it first; done before it, the masters and copies stay as they are until the
   * next backward's updates (what a node's other devices wait for, {@link DeviceGroup}).
   */
  void publishUpdates(Stream compute) {
    if (pendingDelayed) {
      updates.awaitPublished(); // the updates themselves run on beside this step
    } else {
      updates.awaitAll();
    }
    updates.resetTiming(); // from here on: this step's updates
    boolean streamedChanged = false;
    Stream copyIn = ring.copyStream();
    for (int i = 0; i < layers.size(); i++) {
      if (!mastersChanged[i]) {
        continue;
      }
      mastersChanged[i] = false;
      if (slabs.stale(i)) {
        slabs.refreshCopies(i);
      }
      if (layout.streamed(i)) {
        streamedChanged = true;
        continue;
      }
      copyIn.waitFor(gradients.done(i)); // the old weights' last use (backward) is over
      int k = timeline.begin(StepTimeline.Lane.COPY_IN, copyIn);
      long count = layout.count(i);
      backend.copy(
          slabs.weightSource(), 4 * layout.offset(i), residentValues(i), 4 * count, copyIn);
      timeline.end(StepTimeline.Lane.COPY_IN, k, copyIn, 4 * count);
      uploaded[i].record(copyIn);
      awaitUpload[i] = true;
    }
    if (streamedChanged) {
      ring.forget();
    }
  }

  /** Blocks until the host updates begun by backward are done; rethrows their failure. */
  public void awaitUpdates() {
    updates.awaitAll();
  }

  /** Blocks until every gradient of the last backward is in the host slab. */
  public void awaitGradients(Stream compute) {
    compute.synchronize();
    gradients.synchronize();
  }

  /**
   * Says the whole master slab changed on the host (an update applied after backward, or restored
   * weights): the next forward uploads the resident layers and reloads the streamed ones.
   */
  public void mastersChanged() {
    for (int i = 0; i < layers.size(); i++) {
      mastersChanged[i] = layout.count(i) > 0;
      if (layout.count(i) > 0) {
        slabs.markStale(i);
      }
    }
  }

  /**
   * Says the masters and their copies, which another device of the node owns, were updated there:
   * the next forward uploads the resident layers and reloads the streamed ones, as after an update.
   */
  void hostCopyChanged() {
    for (int i = 0; i < layers.size(); i++) {
      mastersChanged[i] = layout.count(i) > 0;
    }
  }

  /**
   * As {@link #mastersChanged}, after an update of the whole slab that wrote the bf16 copies {@link
   * #updateCopies} gave the optimizer (a serial or redone clipped step).
   */
  public void mastersUpdated() {
    for (int i = 0; i < layers.size(); i++) {
      mastersChanged[i] = layout.count(i) > 0;
      if (layout.count(i) > 0) {
        slabs.markUpdated(i);
      }
    }
  }

  /**
   * Where the host optimizer writes the bf16 copies of the streamed layers it updates, in its own
   * pass; none with a delayed update, whose copies lag the masters by a step.
   */
  public Bf16Copies updateCopies() {
    return delayable ? Bf16Copies.NONE : slabs.updateCopies();
  }

  // ---- measurements and read-back -------------------------------------------------------------

  /** What the last training step moved and how long its parts took; waits for it to finish. */
  public StepTimeline.Totals stepTotals(Stream compute) {
    awaitUpdates();
    compute.synchronize();
    ring.synchronize();
    gradients.synchronize();
    return timeline.totals();
  }

  /** Milliseconds the host optimizer has worked since the last forward began. */
  public double hostUpdateMillis() {
    return updates.updateMillis();
  }

  /**
   * Milliseconds the last step's host updates ran on after its last gradient reached the host: the
   * optimizer time backward did not hide. Read after {@link #stepTotals}.
   */
  public double updateTailMillis() {
    return updates.tailMillis();
  }

  /**
   * Milliseconds the last backward waited for the step before's delayed update, which the forward
   * in between did not hide: a delayed update's exposed time.
   */
  public double delayedUpdateWaitMillis() {
    return delayedWaitNanos / 1e6;
  }

  /** Every parameter's gradient of the last backward in model order, on the host. */
  public float[] gradients(Stream compute) {
    if (slabs.gradientShare() != null) {
      throw new IllegalStateException("under ZeRO-2 the host keeps only a share of the gradients");
    }
    awaitGradients(compute);
    awaitUpdates(); // bf16 gradients are widened there
    float[] out = new float[parameterCount()];
    slabs.gradients().getFloats(0, out, 0, out.length);
    return out;
  }

  @Override
  public void close() {
    // Also what a failed constructor made: any field from the first failed allocation on is null.
    try {
      updates.close();
    } finally {
      if (ring != null) {
        ring.synchronize();
      }
      if (gradients != null) {
        gradients.synchronize();
      }
      layers.forEach(Layer::close);
      try (slabs; // null resources are skipped
          ring;
          gradients;
          timeline;
          workspace;
          gradientSlots) {
        if (resident != null) {
          resident.close();
        }
        if (checkpoints != null) {
          checkpoints.close();
        }
        if (uploaded != null) {
          for (Event e : uploaded) {
            if (e != null) {
              e.close();
            }
          }
        }
      }
    }
  }
}
