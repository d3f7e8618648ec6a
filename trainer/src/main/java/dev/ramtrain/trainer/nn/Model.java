package dev.ramtrain.trainer.nn;

import dev.ramtrain.random.Seeds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Fill;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.IntConsumer;
import java.util.function.Supplier;

/**
 * A stack of layers over one parameter slab: forward runs the layers in order, backward in reverse.
 * Owns the layers' activation memory and the slab.
 */
public final class Model implements Network, AutoCloseable {
  private final String spec;
  private final List<Layer> layers;
  private final Parameters parameters;
  private final Workspace workspace;
  private final GradientSlots gradientSlots; // null: bound for inference
  private final InferenceActivations inferenceActivations; // null: bound for training
  private final Backend backend;
  private final int maxBatch;
  private final long seed;
  // What zeroGrad does, worked out once: the runs of the gradient slab it fills with zeros, and the
  // layers it tells that their gradients count as zero (they write them fresh).
  private final List<DeviceBuffer> gradientRunsToFill;
  private final List<Layer> freshGradientWriters;

  private Model(
      String spec,
      List<Layer> layers,
      Parameters parameters,
      Workspace workspace,
      GradientSlots gradientSlots,
      InferenceActivations inferenceActivations,
      Backend backend,
      int maxBatch,
      long seed) {
    this.spec = spec;
    this.layers = layers;
    this.parameters = parameters;
    this.workspace = workspace;
    this.gradientSlots = gradientSlots;
    this.inferenceActivations = inferenceActivations;
    this.backend = backend;
    this.maxBatch = maxBatch;
    this.seed = seed;
    boolean training = inferenceActivations == null;
    this.freshGradientWriters =
        training ? layers.stream().filter(Layer::writesFreshGradients).toList() : List.of();
    this.gradientRunsToFill = training ? gradientRunsToFill(layers, parameters) : List.of();
  }

  /** The gradients of layers that add into theirs, as maximal contiguous runs of the slab. */
  private static List<DeviceBuffer> gradientRunsToFill(List<Layer> layers, Parameters parameters) {
    List<DeviceBuffer> runs = new ArrayList<>();
    long runStart = -1;
    long runEnd = -1;
    for (Layer layer : layers) {
      if (layer.writesFreshGradients()) {
        continue;
      }
      for (ParamSpec p : layer.parameters()) {
        long offset = parameters.entry(p.name()).offset();
        if (offset != runEnd) { // not contiguous with the run being built: a new run
          if (runStart >= 0) {
            runs.add(parameters.grads().view(runStart, runEnd - runStart));
          }
          runStart = offset;
        }
        runEnd = offset + p.count();
      }
    }
    if (runStart >= 0) {
      runs.add(parameters.grads().view(runStart, runEnd - runStart));
    }
    return List.copyOf(runs);
  }

  /**
   * Binds {@code layers} to a fresh slab initialized from {@code seed}, for up to maxBatch samples.
   */
  public static Model build(
      String spec, List<Layer> layers, Backend backend, Stream stream, int maxBatch, long seed) {
    return build(spec, layers, backend, stream, maxBatch, seed, Map.of());
  }

  /** As above, the parameters and buffers {@code pretrained} names starting from its values. */
  public static Model build(
      String spec,
      List<Layer> layers,
      Backend backend,
      Stream stream,
      int maxBatch,
      long seed,
      Map<String, float[]> pretrained) {
    checkChain(spec, layers);
    List<ParamSpec> specs = new ArrayList<>();
    List<ParamSpec> buffers = new ArrayList<>();
    for (Layer layer : layers) {
      specs.addAll(layer.parameters());
      buffers.addAll(layer.buffers());
    }
    Parameters parameters = Parameters.allocate(backend, specs, buffers);
    Workspace workspace = null;
    GradientSlots slots = GradientSlots.forLayers(backend, layers, maxBatch);
    List<Layer> bound = new ArrayList<>();
    try {
      workspace = Workspace.forLayers(backend, layers, maxBatch);
      ParameterSource source = parameters.sharing(workspace, slots);
      for (int i = 0; i < layers.size(); i++) {
        layers.get(i).bind(backend, source.topLevelGradientIn(i), maxBatch);
        bound.add(layers.get(i));
      }
      parameters.initialize(backend, stream, seed, pretrained);
    } catch (RuntimeException e) {
      bound.forEach(Layer::close);
      if (workspace != null) {
        workspace.close();
      }
      slots.close();
      parameters.close();
      throw e;
    }
    return new Model(
        spec, List.copyOf(layers), parameters, workspace, slots, null, backend, maxBatch, seed);
  }

  /**
   * Binds a fresh copy of {@code layers} for inference at up to {@code maxBatch} samples, as
   * PyTorch evaluates under {@code torch.no_grad()}: no gradients, nothing kept for a backward,
   * each activation's memory reused once no later layer reads it ({@link ActivationKeys}); a first
   * copy is bound to nothing to size that memory. Forward only, in evaluation mode; the parameters
   * and buffers are zero until restored (a checkpoint's, {@link Parameters#values}).
   */
  public static Model buildForInference(
      String spec, Supplier<List<Layer>> layers, Backend backend, int maxBatch) {
    InferenceActivations sized = InferenceBinding.size(spec, layers.get(), backend, maxBatch);
    List<Layer> fresh = layers.get();
    Parameters parameters =
        Parameters.allocateForInference(backend, parameterSpecs(fresh), bufferSpecs(fresh));
    Workspace workspace = null;
    InferenceActivations activations = null;
    List<Layer> bound = new ArrayList<>();
    try {
      workspace = Workspace.forLayers(backend, fresh, maxBatch);
      activations = sized.allocate(backend);
      ParameterSource source = parameters.sharing(workspace, null);
      InferenceBinding.bind(fresh, backend, i -> source, activations, maxBatch, bound);
    } catch (RuntimeException e) {
      try (Parameters p = parameters;
          Workspace w = workspace;
          InferenceActivations a = activations) {
        bound.forEach(Layer::close);
        throw e;
      }
    }
    return new Model(
        spec, List.copyOf(fresh), parameters, workspace, null, activations, backend, maxBatch, 0);
  }

  /**
   * Device bytes {@link #buildForInference} allocates for {@code layers} at {@code maxBatch}, by
   * binding a copy as it does: what {@code plan --inference} prints.
   */
  public static InferenceFootprint inferenceFootprint(
      String spec, Supplier<List<Layer>> layers, Backend backend, int maxBatch) {
    List<Layer> copy = layers.get();
    return footprint(copy, InferenceBinding.size(spec, copy, backend, maxBatch), backend, maxBatch);
  }

  private static InferenceFootprint footprint(
      List<Layer> layers, InferenceActivations sized, Backend backend, int maxBatch) {
    long parameters = 4 * parameterSpecs(layers).stream().mapToLong(ParamSpec::count).sum();
    long buffers = 4 * bufferSpecs(layers).stream().mapToLong(ParamSpec::count).sum();
    long workspace =
        layers.stream().mapToLong(l -> l.scratchBytes(backend, maxBatch)).max().orElse(0);
    return new InferenceFootprint(parameters, buffers, workspace, sized.bytes());
  }

  /** What a model bound for inference holds on its device. */
  public record InferenceFootprint(
      long parameterBytes, long bufferBytes, long workspaceBytes, long activationBytes) {
    public long totalBytes() {
      return parameterBytes + bufferBytes + workspaceBytes + activationBytes;
    }
  }

  private static List<ParamSpec> parameterSpecs(List<Layer> layers) {
    return layers.stream().flatMap(l -> l.parameters().stream()).toList();
  }

  private static List<ParamSpec> bufferSpecs(List<Layer> layers) {
    return layers.stream().flatMap(l -> l.buffers().stream()).toList();
  }

  /** Refuses {@code layers} where one's output is not the next one's input. */
  static void checkChain(String spec, List<Layer> layers) {
    for (int i = 1; i < layers.size(); i++) {
      Layer prev = layers.get(i - 1);
      Layer next = layers.get(i);
      if (prev.outputSize() != next.inputSize()) {
        throw new IllegalArgumentException(
            spec
                + ": "
                + prev.name()
                + " gives "
                + prev.outputSize()
                + " values per sample but "
                + next.name()
                + " takes "
                + next.inputSize());
      }
    }
  }

  @Override
  public String spec() {
    return spec;
  }

  public List<Layer> layers() {
    return layers;
  }

  public Parameters parameters() {
    return parameters;
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
  public DeviceBuffer forward(Stream stream, DeviceBuffer x, int batch, boolean training) {
    if (training && inferenceActivations != null) {
      throw new IllegalStateException(spec + " is bound for inference: it evaluates only");
    }
    if (batch < 1 || batch > maxBatch) {
      throw new IllegalArgumentException("batch " + batch + " outside [1, " + maxBatch + "]");
    }
    DeviceBuffer h = x;
    for (Layer layer : layers) {
      h = layer.forward(stream, h, batch, training);
    }
    return h;
  }

  /** Tells the layers which training step the next forward belongs to (seeds dropout). */
  public void beginStep(long step) {
    long stepSeed = Seeds.mix(seed, step);
    layers.forEach(l -> l.beginStep(stepSeed));
  }

  /** Backward from dL/dlogits; gradients accumulate into the slab (zero it each step). */
  public void backward(Stream stream, DeviceBuffer dlogits, int batch) {
    backward(stream, dlogits, batch, layer -> {});
  }

  /**
   * Backward, telling {@code done} of each layer (by index, last first) once its backward is
   * enqueued: its parameters' gradients are final when the stream gets there.
   */
  public void backward(Stream stream, DeviceBuffer dlogits, int batch, IntConsumer done) {
    requireTraining();
    DeviceBuffer g = dlogits;
    for (int i = layers.size() - 1; i >= 0; i--) {
      g = layers.get(i).backward(stream, g, batch, i > 0);
      done.accept(i);
    }
  }

  /**
   * Zeroes the gradients for the next backward: those of layers that write fresh gradients are left
   * to them (a GEMM that overwrites its output saves reading it back, and the fill), the rest
   * filled with zeros, in as few runs of the slab as they make.
   */
  public void zeroGrad(Stream stream) {
    requireTraining();
    freshGradientWriters.forEach(Layer::gradientsAreZero);
    for (DeviceBuffer run : gradientRunsToFill) {
      backend.run(stream, new Fill(run, 0f));
    }
  }

  private void requireTraining() {
    if (inferenceActivations != null) {
      throw new IllegalStateException(spec + " is bound for inference: it has no gradients");
    }
  }

  @Override
  public void close() {
    layers.forEach(Layer::close);
    try (Workspace w = workspace;
        GradientSlots g = gradientSlots;
        InferenceActivations a = inferenceActivations;
        Parameters p = parameters) {
      // closes the slabs last
    }
  }
}
