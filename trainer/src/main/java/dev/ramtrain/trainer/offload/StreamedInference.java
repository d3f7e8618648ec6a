package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.nn.InferenceActivations;
import dev.ramtrain.trainer.nn.InferenceBinding;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ParameterSource;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.nn.Workspace;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

/**
 * A model evaluated with some of its weights in pinned host memory, for a device too small to hold
 * them all beside the activations ({@link InferencePlacement} chooses which): a streamed layer's
 * weights cross into a ring of device slots on the copy stream ahead of the layer that computes, as
 * training streams them ({@link WeightRing}); the other layers' weights and batch norm's running
 * statistics stay on the device; activations are bound for inference, as a resident model's ({@link
 * InferenceBinding}). Forward in evaluation mode only. Computes what the resident model computes,
 * bit for bit: the same operations on the same weights.
 */
public final class StreamedInference implements InferenceNetwork {
  private final String spec;
  private final Backend backend;
  private final List<Layer> layers;
  private final HostLayout layout;
  private final HostSlabs slabs;
  private final Parameters resident; // the buffers (and parameters of no streamed layer)
  private final Workspace workspace;
  private final InferenceActivations activations;
  private final StepTimeline timeline;
  private final WeightRing ring;
  private final int maxBatch;
  private final List<Layer> bound = new ArrayList<>();

  /**
   * Lays the weights of {@code layers} named in {@code streamed} out in pinned host memory (zero
   * until {@link #restore}) and the others' on the device, makes a ring of {@code depth} device
   * slots and binds a fresh copy of the layers for inference at up to {@code maxBatch} samples.
   */
  public StreamedInference(
      String spec,
      Supplier<List<Layer>> layers,
      Set<String> streamed,
      int depth,
      Backend backend,
      int maxBatch) {
    this.spec = spec;
    this.backend = backend;
    this.maxBatch = maxBatch;
    InferenceActivations sized = InferenceBinding.size(spec, layers.get(), backend, maxBatch);
    this.layers = List.copyOf(layers.get());
    this.layout = new HostLayout(spec, this.layers, streamed);
    this.slabs = new HostSlabs(backend, layout, false, false, false);
    Parameters residentSlabs = null;
    Workspace shared = null;
    InferenceActivations arena = null;
    StepTimeline steps = null;
    WeightRing weights = null;
    try {
      residentSlabs =
          Parameters.allocateForInference(backend, layout.residentParameters(), layout.buffers());
      shared = Workspace.forLayers(backend, this.layers, maxBatch);
      arena = sized.allocate(backend);
      steps = new StepTimeline(backend, 3 * this.layers.size() + 2);
      weights = new WeightRing(backend, layout, slabs, depth, steps);
    } catch (RuntimeException e) {
      try (HostSlabs s = slabs;
          Parameters r = residentSlabs;
          Workspace w = shared;
          InferenceActivations a = arena;
          StepTimeline t = steps) {
        throw e;
      }
    }
    this.resident = residentSlabs;
    this.workspace = shared;
    this.activations = arena;
    this.timeline = steps;
    this.ring = weights;
    try {
      InferenceBinding.bind(
          this.layers,
          backend,
          i -> source(i).sharing(workspace, null),
          activations,
          maxBatch,
          bound);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** The device views layer i binds to: its ring slot, or the resident slabs. */
  private ParameterSource source(int i) {
    int j = layout.ordinal(i);
    if (j < 0) {
      return resident;
    }
    long base = layout.offset(i);
    DeviceBuffer slot = ring.weightsOf(j);
    return new ParameterSource() {
      @Override
      public DeviceBuffer value(String name) {
        Parameters.Entry e = layout.entry(name);
        return slot.view(e.offset() - base, e.spec().count());
      }

      @Override
      public DeviceBuffer grad(String name) {
        return null;
      }

      @Override
      public DeviceBuffer buffer(String name) {
        return resident.buffer(name);
      }
    };
  }

  /**
   * Puts {@code c}'s weights into the host slab and its buffers on the device, every tensor checked
   * first by name and shape ({@link Checkpoints#requireTensors}); synchronizes {@code stream}.
   */
  @Override
  public void restore(Checkpoints.Loaded c, Stream stream) {
    Checkpoints.requireModel(c, spec);
    List<Parameters.Entry> expected = new ArrayList<>(layout.entries());
    expected.addAll(resident.entries());
    expected.addAll(resident.bufferEntries());
    Checkpoints.requireTensors(c, expected);
    ring.synchronize(); // no load reads the slab while it changes
    Checkpoints.fill(c, layout.entries(), slabs.masters());
    Checkpoints.uploadTensors(backend, stream, resident.values(), c, resident.entries());
    Checkpoints.uploadTensors(backend, stream, resident.buffers(), c, resident.bufferEntries());
    ring.forget(); // the slots hold the old weights
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

  @Override
  public DeviceBuffer forward(Stream compute, DeviceBuffer x, int batch, boolean training) {
    if (training) {
      throw new IllegalStateException(spec + " is bound for inference: it evaluates only");
    }
    if (batch < 1 || batch > maxBatch) {
      throw new IllegalArgumentException("batch " + batch + " outside [1, " + maxBatch + "]");
    }
    DeviceBuffer h = x;
    for (int i = 0; i < layers.size(); i++) {
      int j = layout.ordinal(i);
      if (j >= 0) {
        ring.prepareForward(compute, i);
      }
      h = layers.get(i).forward(compute, h, batch, false);
      if (j >= 0) {
        ring.release(compute, j);
      }
    }
    return h;
  }

  @Override
  public boolean streamed() {
    return true;
  }

  @Override
  public void close() {
    bound.forEach(Layer::close);
    try (HostSlabs s = slabs;
        Parameters r = resident;
        Workspace w = workspace;
        InferenceActivations a = activations;
        StepTimeline t = timeline;
        WeightRing ring = this.ring) {
      // the ring first: it waits for its last loads
    }
  }
}
