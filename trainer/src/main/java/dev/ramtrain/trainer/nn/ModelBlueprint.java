package dev.ramtrain.trainer.nn;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Stream;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * A model to build: its spec (the name checkpoints carry), a source of fresh unbound layers (an
 * offloaded model may ask twice: with activation checkpointing a second copy sizes the shared
 * arena), the largest batch it runs, the seed of its initial weights and the pretrained values that
 * replace them, by parameter name (empty: trained from scratch).
 */
public record ModelBlueprint(
    String spec,
    Supplier<List<Layer>> layers,
    int maxBatch,
    long seed,
    Map<String, float[]> pretrained) {
  public ModelBlueprint {
    if (maxBatch < 1) {
      throw new IllegalArgumentException(spec + ": the batch size must be >= 1, got " + maxBatch);
    }
    pretrained = Map.copyOf(pretrained);
  }

  public ModelBlueprint(String spec, Supplier<List<Layer>> layers, int maxBatch, long seed) {
    this(spec, layers, maxBatch, seed, Map.of());
  }

  /** This model starting from {@code values} (by parameter name) instead of its seeded ones. */
  public ModelBlueprint withPretrained(Map<String, float[]> values) {
    return new ModelBlueprint(spec, layers, maxBatch, seed, values);
  }

  /** The model {@code spec} describes for images of {@code input}. */
  public static ModelBlueprint of(String spec, ImageShape input, int maxBatch, long seed) {
    return of(spec, input, maxBatch, seed, Precision.FP32);
  }

  /** As above, its Linear and convolution layers computing in {@code precision}. */
  public static ModelBlueprint of(
      String spec, ImageShape input, int maxBatch, long seed, Precision precision) {
    return of(spec, input, maxBatch, seed, precision, 0f);
  }

  /** As above, with stochastic depth {@code dropPath} where the architecture has it. */
  public static ModelBlueprint of(
      String spec, ImageShape input, int maxBatch, long seed, Precision precision, float dropPath) {
    return new ModelBlueprint(
        spec, () -> ModelSpec.parse(spec, input, precision, dropPath), maxBatch, seed);
  }

  /** Binds a fresh copy of the layers on the device: the resident model. */
  public Model buildResident(Backend backend, Stream stream) {
    return Model.build(spec, layers.get(), backend, stream, maxBatch, seed, pretrained);
  }
}
