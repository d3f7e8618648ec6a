package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.ParameterSource;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A model whose master weights and gradients live in pinned host memory, with some layers resident
 * on the device and the others streamed through a fixed ring of weight slots (see
 * docs/architecture.md, "Offload"). Streamed layer j (counting streamed layers in model order)
 * always binds to weight slot {@code j mod k} and gradient slot {@code j mod 2}, so layers bind
 * once and nothing is allocated per step. Forward and backward enqueue, in program order and
 * without blocking, each slot's load on a copy stream after the slot's previous use, each layer's
 * compute after its load, and each gradient's return to the host on a second copy stream.
 */
public final class StreamedModel implements AutoCloseable {
  private final Backend backend;
  private final List<Layer> layers;
  private final int[] ordinal; // per top-level layer: its number among the streamed, or -1
  private final Map<String, Parameters.Entry> hostEntries; // offsets in the host slabs
  private final long[] layerOffset; // per top-level layer: its first parameter in the host slabs
  private final long[] layerCount;
  private final long[] residentAt; // per resident layer: its first parameter in the resident slab
  private final int[] streamedLayer; // per streamed ordinal: its top-level layer
  private final HostBuffer masters;
  private final HostBuffer hostGrads;
  private final Parameters resident; // resident layers' values and gradients, every buffer
  private final List<DeviceBuffer> weightSlots = new ArrayList<>();
  private final List<DeviceBuffer> gradSlots = new ArrayList<>();
  private final Stream copyIn;
  private final Stream copyOut;
  private final int streamedCount;
  private final int[] slotHolds; // which streamed ordinal each weight slot holds (as enqueued)
  private final Event[] slotFree; // recorded on the compute stream after a slot's last use
  private final Event[] slotLoaded; // recorded on the copy stream after a slot's load
  private final Event[] gradReady;
  private final Event[] gradReturned;
  private final int maxBatch;
  private final long seed;

  /**
   * Lays out {@code layers} (unbound), initializes the host masters from {@code seed} as a resident
   * model would, uploads the resident layers and binds every layer; {@code streamedNames} are the
   * top-level layers to stream through {@code depth} weight slots.
   */
  public StreamedModel(
      List<Layer> layers,
      Set<String> streamedNames,
      int depth,
      Backend backend,
      Stream stream,
      int maxBatch,
      long seed) {
    if (depth < 1) {
      throw new IllegalArgumentException("prefetch depth must be >= 1, got " + depth);
    }
    this.backend = backend;
    this.layers = List.copyOf(layers);
    this.maxBatch = maxBatch;
    this.seed = seed;
    this.ordinal = new int[layers.size()];
    this.layerOffset = new long[layers.size()];
    this.layerCount = new long[layers.size()];
    this.residentAt = new long[layers.size()];
    this.hostEntries = new LinkedHashMap<>();
    List<ParamSpec> residentSpecs = new ArrayList<>();
    List<ParamSpec> buffers = new ArrayList<>();
    long offset = 0;
    long residentOffset = 0;
    long largest = 0;
    int streamed = 0;
    List<Integer> streamedIndices = new ArrayList<>();
    for (int i = 0; i < layers.size(); i++) {
      Layer layer = layers.get(i);
      boolean streamIt = streamedNames.contains(layer.name()) && !layer.parameters().isEmpty();
      ordinal[i] = streamIt ? streamed++ : -1;
      layerOffset[i] = offset;
      for (ParamSpec spec : layer.parameters()) {
        hostEntries.put(spec.name(), new Parameters.Entry(spec, offset));
        offset += spec.count();
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
    this.streamedCount = streamed;
    this.streamedLayer = streamedIndices.stream().mapToInt(Integer::intValue).toArray();
    this.masters = backend.allocateHost("masters", 4 * offset);
    this.hostGrads = backend.allocateHost("host-gradients", 4 * offset);
    Parameters.writeInitialValues(
        hostEntries.values(), seed, masters.asByteBuffer().asFloatBuffer());
    this.resident = Parameters.allocate(backend, residentSpecs, buffers);
    int slots = Math.min(depth, streamed);
    for (int s = 0; s < slots; s++) {
      weightSlots.add(backend.allocate("weight-slot." + s, DType.F32, largest));
    }
    for (int s = 0; s < Math.min(2, streamed); s++) {
      gradSlots.add(backend.allocate("grad-slot." + s, DType.F32, largest));
    }
    this.copyIn = backend.createStream("weights-in");
    this.copyOut = backend.createStream("gradients-out");
    this.slotHolds = new int[slots];
    java.util.Arrays.fill(slotHolds, -1);
    this.slotFree = events(slots);
    this.slotLoaded = events(slots);
    this.gradReady = events(gradSlots.size());
    this.gradReturned = events(gradSlots.size());
    // Resident values and buffers start as a resident model's would: the same seeded values.
    try {
      resident.initialize(backend, stream, seed);
      for (int i = 0; i < layers.size(); i++) {
        Layer layer = layers.get(i);
        layer.bind(backend, source(i), maxBatch);
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
    DeviceBuffer weights = weightSlots.get(j % weightSlots.size());
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

  /** Brings every gradient to the host slab: resident ones copied back, streamed ones awaited. */
  private void awaitGradients(Stream compute) {
    for (int i = 0; i < layers.size(); i++) {
      if (ordinal[i] < 0 && layerCount[i] > 0) {
        backend.copy(
            resident.grads().view(residentAt[i], layerCount[i]),
            hostGrads,
            4 * layerOffset[i],
            4 * layerCount[i],
            compute);
      }
    }
    compute.synchronize();
    copyOut.synchronize();
  }

  public int streamedLayers() {
    return streamedCount;
  }

  /**
   * Zeroes the resident gradients (streamed ones are zeroed in their slot before each backward).
   */
  public void zeroGrad(Stream compute) {
    backend.fill(compute, resident.grads(), 0f);
  }

  /** As {@code Model.beginStep}: seeds the layers that draw random numbers for this step. */
  public void beginStep(long step) {
    long stepSeed = dev.ramtrain.etl.source.SampleIds.mix(seed, step);
    layers.forEach(l -> l.beginStep(stepSeed));
  }

  public DeviceBuffer forward(Stream compute, DeviceBuffer x, int batch, boolean training) {
    if (batch < 1 || batch > maxBatch) {
      throw new IllegalArgumentException("batch " + batch + " outside [1, " + maxBatch + "]");
    }
    DeviceBuffer h = x;
    for (int i = 0; i < layers.size(); i++) {
      int j = ordinal[i];
      if (j >= 0) {
        for (int ahead = j; ahead < Math.min(streamedCount, j + weightSlots.size()); ahead++) {
          load(ahead); // this layer's weights and the next ones the ring has room for
        }
        compute.waitFor(slotLoaded[j % weightSlots.size()]);
      }
      h = layers.get(i).forward(compute, h, batch, training);
      if (j >= 0) {
        slotFree[j % weightSlots.size()].record(compute);
      }
    }
    return h;
  }

  /** Backward from dL/dlogits; streamed gradients return to the host slab as they are done. */
  public void backward(Stream compute, DeviceBuffer dlogits, int batch) {
    DeviceBuffer g = dlogits;
    for (int i = layers.size() - 1; i >= 0; i--) {
      int j = ordinal[i];
      if (j >= 0) {
        for (int ahead = j; ahead > Math.max(-1, j - weightSlots.size()); ahead--) {
          load(ahead);
        }
        compute.waitFor(slotLoaded[j % weightSlots.size()]);
        int gs = j % gradSlots.size();
        compute.waitFor(gradReturned[gs]); // the slot's previous gradient has reached the host
        backend.fill(compute, gradSlots.get(gs).view(0, layerCount[i]), 0f);
      }
      g = layers.get(i).backward(compute, g, batch, i > 0);
      if (j >= 0) {
        int gs = j % gradSlots.size();
        slotFree[j % weightSlots.size()].record(compute);
        gradReady[gs].record(compute);
        copyOut.waitFor(gradReady[gs]);
        backend.copy(
            gradSlots.get(gs).view(0, layerCount[i]),
            hostGrads,
            4 * layerOffset[i],
            4 * layerCount[i],
            copyOut);
        gradReturned[gs].record(copyOut);
      }
    }
  }

  /** Enqueues streamed layer j's weights into its slot unless the slot already holds them. */
  private void load(int j) {
    int s = j % weightSlots.size();
    if (slotHolds[s] == j) {
      return;
    }
    int i = streamedLayer[j];
    copyIn.waitFor(slotFree[s]); // after the slot's previous user has computed
    backend.copy(
        masters,
        4 * layerOffset[i],
        weightSlots.get(s).view(0, layerCount[i]),
        4 * layerCount[i],
        copyIn);
    slotLoaded[s].record(copyIn);
    slotHolds[s] = j;
  }

  /** Parameters in all (resident and streamed): the length of the host slabs. */
  public long parameterCount() {
    return masters.bytes() / 4;
  }

  /**
   * Ends a training step: waits for every gradient on the host (resident ones copied back), runs
   * the host optimizer over the master slab, and uploads the resident layers' new weights. Streamed
   * layers load the new masters at their next use (their slots are marked stale).
   */
  public void optimizerStep(Stream compute, HostAdamW optimizer, float lr) {
    awaitGradients(compute);
    optimizer.step(masters, hostGrads, lr);
    for (int i = 0; i < layers.size(); i++) {
      if (ordinal[i] < 0 && layerCount[i] > 0) {
        backend.copy(masters, 4 * layerOffset[i], residentValues(i), 4 * layerCount[i], compute);
      }
    }
    java.util.Arrays.fill(slotHolds, -1);
  }

  /** The master weights in model order (a copy). Synchronizes. */
  public float[] weights(Stream compute) {
    compute.synchronize();
    float[] out = new float[(int) parameterCount()];
    masters.asByteBuffer().asFloatBuffer().get(out);
    return out;
  }

  /**
   * Every parameter's gradient in model order, on the host: resident ones copied back, streamed
   * ones already returned. Synchronizes.
   */
  public float[] gradients(Stream compute) {
    awaitGradients(compute);
    float[] out = new float[(int) (hostGrads.bytes() / 4)];
    hostGrads.asByteBuffer().asFloatBuffer().get(out);
    return out;
  }

  @Override
  public void close() {
    copyIn.synchronize();
    copyOut.synchronize();
    layers.forEach(Layer::close);
    weightSlots.forEach(DeviceBuffer::close);
    gradSlots.forEach(DeviceBuffer::close);
    resident.close();
    masters.close();
    hostGrads.close();
    for (Event[] group : List.of(slotFree, slotLoaded, gradReady, gradReturned)) {
      for (Event e : group) {
        e.close();
      }
    }
  }
}
