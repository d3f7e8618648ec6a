package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;

/**
 * Binding a model's layers for inference, wherever their weights live (a resident {@link Model}, or
 * a model whose weights stream from the host): the activation memory sized by binding a copy of the
 * layers to nothing, then the layers bound into it in order ({@link ActivationKeys}).
 */
public final class InferenceBinding {
  private InferenceBinding() {}

  /**
   * The activation memory {@code layers} (a copy, closed here) take bound for inference at {@code
   * maxBatch} on {@code backend}; they bind to stand-ins, so no weight is allocated.
   */
  public static InferenceActivations size(
      String spec, List<Layer> layers, Backend backend, int maxBatch) {
    Model.checkChain(spec, layers);
    InferenceActivations sizing = InferenceActivations.sizing(backend.largestAllocationBytes());
    List<Layer> bound = new ArrayList<>();
    try (StandInParameters p = new StandInParameters(backend);
        Workspace workspace = Workspace.standIn(backend)) {
      bind(layers, backend, i -> p.sharing(workspace, null), sizing, maxBatch, bound);
    } finally {
      bound.forEach(Layer::close);
    }
    return sizing;
  }

  /**
   * Binds {@code layers} in order, layer i to {@code sources.apply(i)} (its weights and the shared
   * workspace), each reading the last one's output; into {@code bound} as they bind.
   */
  public static void bind(
      List<Layer> layers,
      Backend backend,
      IntFunction<ParameterSource> sources,
      InferenceActivations memory,
      int maxBatch,
      List<Layer> bound) {
    ActivationKeys keys = ActivationKeys.first(memory);
    for (int i = 0; i < layers.size(); i++) {
      Layer layer = layers.get(i);
      layer.bind(backend, sources.apply(i).withActivationKeys(keys), maxBatch);
      bound.add(layer);
      keys = keys.next();
    }
  }
}
