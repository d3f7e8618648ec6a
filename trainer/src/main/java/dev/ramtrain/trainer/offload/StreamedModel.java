package dev.ramtrain.trainer.offload;

import dev.ramtrain.format.ids.SampleIds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Network;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.ParameterSource;
import dev.ramtrain.trainer.nn.Parameters;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * A model whose master weights and gradients live in pinned host memory, with some layers resident
 * on the device and the others streamed through a fixed ring of weight slots (see
 * docs/architecture.md, "Offload"). Streamed layer j (counting streamed layers in model order)
 * always binds to weight slot {@code j mod k} and gradient slot {@code j mod 2}, so layers bind
 * once and nothing is allocated per step.
 *
 * <p>With bf16 device weights the ring slots hold bf16 copies (half the bytes on the bus) of the
 * fp32 masters, rounded on the host as each layer's update finishes; right before a streamed layer
 * computes, its slot is widened into one fp32 working buffer on the compute stream, so the layers
 * compute in fp32 from bf16-rounded weights and gradients and masters stay fp32.
 *
 * <p>With activation checkpointing ({@link ActivationCheckpoints}) forward keeps only each layer's
 * output and backward recomputes a layer's forward from it right before its backward.
 *
 * <p>With a delayed update (ZeRO-Offload's DPU) loads and uploads read a published copy of the
 * weights, which each layer's update task refreshes from the masters just before updating them: the
 * next step starts once every layer is published and computes with the weights from before this
 * step's update, which runs beside its forward (its backward, which refills the gradient slab the
 * updates read, waits for them).
 *
 * <p>Forward and backward enqueue, in program order and without blocking: each slot's load on the
 * copy-in stream after the slot's previous use, each layer's compute after its load, and each
 * layer's gradient (streamed or resident) back to the host slab on the copy-out stream as soon as
 * that layer's backward is done. A {@link HostUpdate} given to backward then runs on a host thread
 * for each layer whose gradient has landed, while the device goes on with earlier layers; the next
 * forward waits for those updates before it loads any weights.
 */
public final class StreamedModel implements Network, AutoCloseable {
  /** The optimizer applied to parameters [from, to) of the host slabs. */
  public interface HostUpdate {
    void update(int from, int to);
  }

  private final String spec;
  private final Backend backend;
  private final List<Layer> layers;
  private final int[] ordinal; // per top-level layer: its number among the streamed, or -1
  private final Map<String, Parameters.Entry> hostEntries; // offsets in the host slabs
  private final List<Parameters.Entry> hostEntryList;
  private final long[] layerOffset; // per top-level layer: its first parameter in the host slabs
  private final long[] layerCount;
  private final long[] residentAt; // per resident layer: its first parameter in the resident slab
  private final int[] streamedLayer; // per streamed ordinal: its top-level layer
  private final HostBuffer masters;
  private final HostBuffer mastersBf16; // bf16 copies of the streamed layers' masters, or null
  private final long[] bf16Offset; // per streamed layer: its first element in mastersBf16
  private final boolean[] copiesStale; // per layer: published / bf16 copies lag the masters
  private final boolean delayable; // delayed updates: loads read the published weights
  private final long delayFromStep;
  private boolean delayThisStep; // the update begun by this step's backward runs late
  private boolean pendingDelayed; // the pending updates were begun delayed
  private final HostBuffer published; // delayable: the weights steps compute with, or null
  private final DeviceBuffer working; // bf16: the fp32 weights of the streamed layer computing
  private ActivationCheckpoints checkpoints; // null: every layer keeps its own activations
  private final HostBuffer hostGrads;
  private final Parameters resident; // resident layers' values and gradients, every buffer
  private final List<DeviceBuffer> weightSlots = new ArrayList<>();
  private final List<DeviceBuffer> gradSlots = new ArrayList<>();
  private final Stream copyIn;
  private final Stream copyOut;
  private final int[] slotHolds; // which streamed ordinal each weight slot holds (as enqueued)
  private final Event[] slotFree; // recorded on the compute stream after a slot's last use
  private final Event[] slotLoaded; // recorded on the copy stream after a slot's load
  private final Event[] gradReturned; // per gradient slot: its last copy to the host is done
  private final Event[] gradDone; // per layer: its backward is done (compute stream)
  private final Event[] gradOnHost; // per layer: its gradient is in the host slab
  private final Event[] uploaded; // per resident layer: its new weights are on the device
  private final boolean[] mastersChanged; // per layer: updated on the host since last uploaded
  private final boolean[] awaitUpload; // per resident layer: forward must wait for uploaded[i]
  private final HostUpdateQueue updates = new HostUpdateQueue();
  private final StepTimeline timeline;
  private final int maxBatch;
  private final long seed;

  /**
   * Lays out {@code layers} (unbound), initializes the host masters from {@code seed} as a resident
   * model would, uploads the resident layers and binds every layer ({@code model} may be called
   * twice: with activation checkpointing a second copy sizes the shared arena).
   */
  public StreamedModel(
      String spec,
      Supplier<List<Layer>> model,
      Streaming how,
      Backend backend,
      Stream stream,
      int maxBatch,
      long seed) {
    Set<String> streamedNames = how.streamed();
    this.spec = spec;
    this.backend = backend;
    List<Layer> layers = model.get();
    this.layers = List.copyOf(layers);
    this.maxBatch = maxBatch;
    this.seed = seed;
    int n = layers.size();
    this.ordinal = new int[n];
    this.layerOffset = new long[n];
    this.layerCount = new long[n];
    this.residentAt = new long[n];
    this.hostEntries = new LinkedHashMap<>();
    List<ParamSpec> residentSpecs = new ArrayList<>();
    List<ParamSpec> buffers = new ArrayList<>();
    long offset = 0;
    long residentOffset = 0;
    long largest = 0;
    int streamed = 0;
    List<Integer> streamedIndices = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Layer layer = layers.get(i);
      boolean streamIt = streamedNames.contains(layer.name()) && !layer.parameters().isEmpty();
      ordinal[i] = streamIt ? streamed++ : -1;
      layerOffset[i] = offset;
      for (ParamSpec p : layer.parameters()) {
        hostEntries.put(p.name(), new Parameters.Entry(p, offset));
        offset += p.count();
      }
      layerCount[i] = offset - layerOffset[i];
      largest = streamIt ? Math.max(largest, layerCount[i]) : largest;
      if (streamIt) {
        streamedIndices.add(i);
      } else {
        residentSpecs.addAll(layer.parameters()); // laid out in this order from offset 0
        residentAt[i] = residentOffset;
        residentOffset += layerCount[i];
      }
      buffers.addAll(layer.buffers());
    }
    if (offset > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(
          spec + " has " + offset + " parameters; host slabs index at most 2^31 - 1");
    }
    this.hostEntryList = List.copyOf(hostEntries.values());
    this.streamedLayer = streamedIndices.stream().mapToInt(Integer::intValue).toArray();
    boolean bf16 = how.bf16Weights() && streamed > 0;
    this.bf16Offset = new long[n];
    this.copiesStale = new boolean[n];
    long bf16Count = 0;
    for (int i : streamedLayer) {
      bf16Offset[i] = bf16Count;
      bf16Count += layerCount[i];
    }
    this.masters = backend.allocateHost("masters", 4 * offset);
    this.mastersBf16 = bf16 ? backend.allocateHost("masters-bf16", 2 * bf16Count) : null;
    this.delayable = how.delayedUpdate();
    this.delayFromStep = how.delayWarmupSteps();
    this.published = delayable ? backend.allocateHost("published-weights", 4 * offset) : null;
    this.hostGrads = backend.allocateHost("host-gradients", 4 * offset);
    Parameters.writeInitialValues(hostEntryList, seed, masters.asByteBuffer().asFloatBuffer());
    this.resident = Parameters.allocate(backend, residentSpecs, buffers);
    int slots = Math.min(how.prefetchDepth(), streamed);
    for (int s = 0; s < slots; s++) {
      weightSlots.add(backend.allocate("weight-slot." + s, bf16 ? DType.BF16 : DType.F32, largest));
    }
    this.working = bf16 ? backend.allocate("weight-working", DType.F32, largest) : null;
    for (int s = 0; s < Math.min(2, streamed); s++) {
      gradSlots.add(backend.allocate("grad-slot." + s, DType.F32, largest));
    }
    this.copyIn = backend.createStream("weights-in");
    this.copyOut = backend.createStream("gradients-out");
    this.slotHolds = new int[slots];
    Arrays.fill(slotHolds, -1);
    this.slotFree = events(slots);
    this.slotLoaded = events(slots);
    this.gradReturned = events(gradSlots.size());
    this.gradDone = events(n);
    this.gradOnHost = events(n);
    this.uploaded = events(n);
    this.mastersChanged = new boolean[n];
    this.awaitUpload = new boolean[n];
    this.timeline = new StepTimeline(backend, 3 * n + 2);
    // Resident values and buffers start as a resident model's would: the same seeded values.
    try {
      resident.initialize(backend, stream, seed);
      for (int i = 0; i < n; i++) {
        refreshCopies(i);
      }
      if (how.activationCheckpointing()) {
        checkpoints =
            new ActivationCheckpoints(backend, this.layers, model.get(), this::source, maxBatch);
      }
      for (int i = 0; i < n; i++) {
        Layer layer = layers.get(i);
        layer.bind(
            backend, checkpoints != null ? checkpoints.source(source(i)) : source(i), maxBatch);
        if (ordinal[i] < 0 && layerCount[i] > 0) {
          backend.copy(masters, 4 * layerOffset[i], residentValues(i), 4 * layerCount[i], stream);
        }
      }
      stream.synchronize();
    } catch (RuntimeException e) {
      close(); // a layer that failed to bind leaves nothing allocated behind
      throw e;
    }
  }

  private Event[] events(int n) {
    Event[] e = new Event[n];
    for (int i = 0; i < n; i++) {
      e[i] = backend.createEvent();
    }
    return e;
  }

  /** The device views layer i binds to: resident slabs, or its fixed slots. */
  private ParameterSource source(int i) {
    int j = ordinal[i];
    if (j < 0) {
      return resident;
    }
    long base = layerOffset[i];
    DeviceBuffer weights = working != null ? working : weightSlots.get(j % weightSlots.size());
    DeviceBuffer grads = gradSlots.get(j % gradSlots.size());
    return new ParameterSource() {
      @Override
      public DeviceBuffer value(String name) {
        Parameters.Entry e = hostEntries.get(name);
        return weights.view(e.offset() - base, e.spec().count());
      }

      @Override
      public DeviceBuffer grad(String name) {
        Parameters.Entry e = hostEntries.get(name);
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
    return resident.values().view(residentAt[i], layerCount[i]);
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

  public int streamedLayers() {
    return streamedLayer.length;
  }

  /** Parameters in all (resident and streamed): the length of the host slabs. */
  public int parameterCount() {
    return (int) (masters.bytes() / 4);
  }

  /** Parameters of the top-level layer {@code name}. */
  public long layerParameters(String name) {
    for (int i = 0; i < layers.size(); i++) {
      if (layers.get(i).name().equals(name)) {
        return layerCount[i];
      }
    }
    throw new IllegalArgumentException("no layer " + name);
  }

  /** The fp32 master weights in model order (the resident slab's layout), in pinned memory. */
  public HostBuffer masters() {
    return masters;
  }

  /** Every parameter's gradient in model order once {@link #awaitGradients} returns. */
  public HostBuffer hostGradients() {
    return hostGrads;
  }

  /** Where each parameter lives in the host slabs. */
  public List<Parameters.Entry> entries() {
    return hostEntryList;
  }

  /** Buffers (batch-norm statistics): always resident. */
  public Parameters residentSlabs() {
    return resident;
  }

  /**
   * Starts a training step: zeroes the resident gradients once their last copies have left, and
   * seeds the layers that draw random numbers (as {@code Model.beginStep}).
   */
  public void beginStep(Stream compute, long step) {
    timeline.reset();
    delayThisStep = delayable && step >= delayFromStep;
    for (int i = 0; i < layers.size(); i++) {
      if (ordinal[i] < 0 && layerCount[i] > 0) {
        compute.waitFor(gradOnHost[i]); // the previous step's copy has read the slab
      }
    }
    backend.fill(compute, resident.grads(), 0f); // streamed ones are zeroed in their slot
    long stepSeed = SampleIds.mix(seed, step);
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
      int j = ordinal[i];
      if (j >= 0) {
        for (int ahead = j;
            ahead < Math.min(streamedLayer.length, j + weightSlots.size());
            ahead++) {
          load(ahead); // this layer's weights and the next ones the ring has room for
        }
        useSlot(compute, i);
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
      if (j >= 0 && working == null) {
        slotFree[j % weightSlots.size()].record(compute);
      }
    }
    return h;
  }

  /**
   * Backward from dL/dlogits. Every layer's gradient returns to the host slab as soon as its
   * backward is done; {@code update} (null: none) then runs for that layer's range on the host
   * optimizer thread, in the order gradients land.
   */
  public void backward(Stream compute, DeviceBuffer dlogits, int batch, HostUpdate update) {
    updates.awaitAll(); // delayed ones read the gradient slab this backward refills
    pendingDelayed = delayThisStep;
    timeline.beginPass(compute);
    DeviceBuffer g = dlogits;
    for (int i = layers.size() - 1; i >= 0; i--) {
      int j = ordinal[i];
      if (j >= 0) {
        for (int ahead = j; ahead > Math.max(-1, j - weightSlots.size()); ahead--) {
          load(ahead);
        }
        useSlot(compute, i);
        compute.waitFor(gradReturned[j % gradSlots.size()]); // its previous gradient has left
      }
      int k = timeline.begin(StepTimeline.Lane.COMPUTE, compute);
      if (j >= 0) {
        backend.fill(compute, gradSlots.get(j % gradSlots.size()).view(0, layerCount[i]), 0f);
      }
      if (checkpoints != null) {
        checkpoints.recompute(compute, i, batch);
      }
      g = layers.get(i).backward(compute, g, batch, i > 0);
      if (checkpoints != null && g != null) {
        g = checkpoints.keepGradient(compute, i, g, batch);
      }
      timeline.end(StepTimeline.Lane.COMPUTE, k, compute, 0);
      if (layerCount[i] > 0) {
        returnGradient(compute, i);
        if (update != null) {
          scheduleUpdate(i, update);
        }
      }
    }
  }

  /** Copies layer i's gradient to the host slab on the copy-out stream once backward made it. */
  private void returnGradient(Stream compute, int i) {
    int j = ordinal[i];
    gradDone[i].record(compute);
    if (j >= 0 && working == null) {
      slotFree[j % weightSlots.size()].record(compute);
    }
    copyOut.waitFor(gradDone[i]);
    DeviceBuffer source =
        j >= 0
            ? gradSlots.get(j % gradSlots.size()).view(0, layerCount[i])
            : resident.grads().view(residentAt[i], layerCount[i]);
    int k = timeline.begin(StepTimeline.Lane.COPY_OUT, copyOut);
    backend.copy(source, hostGrads, 4 * layerOffset[i], 4 * layerCount[i], copyOut);
    timeline.end(StepTimeline.Lane.COPY_OUT, k, copyOut, 4 * layerCount[i]);
    gradOnHost[i].record(copyOut);
    if (j >= 0) {
      gradReturned[j % gradSlots.size()].record(copyOut);
    }
  }

  /** Runs {@code update} over layer i's range once its gradient is on the host. */
  private void scheduleUpdate(int i, HostUpdate update) {
    int from = (int) layerOffset[i];
    int to = (int) (layerOffset[i] + layerCount[i]);
    updates.submit(gradOnHost[i], from, to, update, delayThisStep, () -> refreshCopies(i));
    mastersChanged[i] = true;
  }

  /**
   * Waits for every host update begun by backward, then enqueues the uploads of resident layers
   * whose masters changed and forgets what the weight slots held: loads read the new masters.
   */
  private void publishUpdates(Stream compute) {
    if (pendingDelayed) {
      updates.awaitPublished(); // the updates themselves run on beside this step
    } else {
      updates.awaitAll();
    }
    updates.resetTiming(); // from here on: this step's updates
    boolean streamedChanged = false;
    for (int i = 0; i < layers.size(); i++) {
      if (!mastersChanged[i]) {
        continue;
      }
      mastersChanged[i] = false;
      if (copiesStale[i]) {
        refreshCopies(i);
      }
      if (ordinal[i] >= 0) {
        streamedChanged = true;
        continue;
      }
      copyIn.waitFor(gradDone[i]); // the old weights' last use (backward) is over
      int k = timeline.begin(StepTimeline.Lane.COPY_IN, copyIn);
      backend.copy(
          weightSource(), 4 * layerOffset[i], residentValues(i), 4 * layerCount[i], copyIn);
      timeline.end(StepTimeline.Lane.COPY_IN, k, copyIn, 4 * layerCount[i]);
      uploaded[i].record(copyIn);
      awaitUpload[i] = true;
    }
    if (streamedChanged) {
      Arrays.fill(slotHolds, -1);
    }
  }

  /** Blocks until the host updates begun by backward are done; rethrows their failure. */
  public void awaitUpdates() {
    updates.awaitAll();
  }

  /** Blocks until every gradient of the last backward is in the host slab. */
  public void awaitGradients(Stream compute) {
    compute.synchronize();
    copyOut.synchronize();
  }

  /**
   * Says the whole master slab changed on the host (an update applied after backward, or restored
   * weights): the next forward uploads the resident layers and reloads the streamed ones.
   */
  public void mastersChanged() {
    for (int i = 0; i < layers.size(); i++) {
      mastersChanged[i] = layerCount[i] > 0;
      copiesStale[i] = layerCount[i] > 0;
    }
  }

  /** Enqueues streamed layer j's weights into its slot unless the slot already holds them. */
  private void load(int j) {
    int s = j % weightSlots.size();
    if (slotHolds[s] == j) {
      return;
    }
    int i = streamedLayer[j];
    copyIn.waitFor(slotFree[s]); // after the slot's previous user has computed (or widened it)
    int k = timeline.begin(StepTimeline.Lane.COPY_IN, copyIn);
    DeviceBuffer slot = weightSlots.get(s).view(0, layerCount[i]);
    if (mastersBf16 != null) {
      backend.copy(mastersBf16, 2 * bf16Offset[i], slot, slot.bytes(), copyIn);
    } else {
      backend.copy(weightSource(), 4 * layerOffset[i], slot, slot.bytes(), copyIn);
    }
    timeline.end(StepTimeline.Lane.COPY_IN, k, copyIn, slot.bytes());
    slotLoaded[s].record(copyIn);
    slotHolds[s] = j;
  }

  /**
   * Makes streamed layer i's weights usable on the compute stream: waits for its slot's load, and
   * with bf16 slots widens it into the fp32 working buffer, after which the slot may be reloaded.
   */
  private void useSlot(Stream compute, int i) {
    int s = ordinal[i] % weightSlots.size();
    compute.waitFor(slotLoaded[s]);
    if (working != null) {
      backend.convert(
          compute, weightSlots.get(s).view(0, layerCount[i]), working.view(0, layerCount[i]));
      slotFree[s].record(compute);
    }
  }

  /** Where fp32 loads and uploads read: the published weights with a delayed update. */
  private HostBuffer weightSource() {
    return delayable ? published : masters;
  }

  /**
   * Brings layer i's copies up to its masters: the published weights (delayed update) and the bf16
   * copy of a streamed layer (bf16 slots).
   */
  private void refreshCopies(int i) {
    if (delayable) {
      MemoryUtil.copyMemory(
          masters.address() + 4 * layerOffset[i],
          published.address() + 4 * layerOffset[i],
          4 * layerCount[i]);
    }
    copiesStale[i] = false;
    if (mastersBf16 == null || ordinal[i] < 0) {
      return;
    }
    FloatBuffer from = masters.asByteBuffer().asFloatBuffer();
    ShortBuffer to = mastersBf16.asByteBuffer().asShortBuffer();
    int src = (int) layerOffset[i];
    int dst = (int) bf16Offset[i];
    for (int e = 0; e < layerCount[i]; e++) {
      to.put(dst + e, Bf16.fromFloat(from.get(src + e)));
    }
  }

  /** What the last training step moved and how long its parts took; waits for it to finish. */
  public StepTimeline.Totals stepTotals(Stream compute) {
    awaitUpdates();
    compute.synchronize();
    copyIn.synchronize();
    copyOut.synchronize();
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

  /** The master weights in model order (a copy), after pending updates. */
  public float[] weights(Stream compute) {
    awaitUpdates();
    compute.synchronize();
    float[] out = new float[parameterCount()];
    masters.asByteBuffer().asFloatBuffer().get(out);
    return out;
  }

  /** Every parameter's gradient of the last backward in model order, on the host. */
  public float[] gradients(Stream compute) {
    awaitGradients(compute);
    float[] out = new float[parameterCount()];
    hostGrads.asByteBuffer().asFloatBuffer().get(out);
    return out;
  }

  @Override
  public void close() {
    try {
      updates.close();
    } finally {
      copyIn.synchronize();
      copyOut.synchronize();
      layers.forEach(Layer::close);
      weightSlots.forEach(DeviceBuffer::close);
      gradSlots.forEach(DeviceBuffer::close);
      resident.close();
      masters.close();
      hostGrads.close();
      if (mastersBf16 != null) {
        mastersBf16.close();
      }
      if (published != null) {
        published.close();
      }
      if (working != null) {
        working.close();
      }
      if (checkpoints != null) {
        checkpoints.close();
      }
      timeline.close();
      for (Event[] group :
          List.of(slotFree, slotLoaded, gradReturned, gradDone, gradOnHost, uploaded)) {
        for (Event e : group) {
          e.close();
        }
      }
    }
  }
}
