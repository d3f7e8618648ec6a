package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Memory for every layer's input gradient, shared by the whole model as autograd frees a gradient
 * once the layer below has consumed it. Top-level layers alternate between two slots by position
 * ({@link ParameterSource#topLevelGradientIn}): layer i reads layer i+1's gradient while it writes
 * its own. A composite names a slot for each child ({@link ParameterSource#inputGradientIn}):
 * siblings alternate likewise, and a gradient that must outlive a chain (the one both branches of a
 * residual block start from) takes a slot of its own; a top-level composite may hand its children
 * its own slot and, once read, the one its gradient arrived in ({@link
 * ParameterSource#inputGradientInto}). A slot's name is its path through the composites, so a
 * nested composite never lands on its parent's slots, and every composite of the same kind at the
 * same depth shares them: they run backward one at a time.
 *
 * <p>Every slot holds the largest input any layer of the model takes ({@link Layer#largestInput})
 * at the model's batch, so a slot is allocated when first named.
 */
public final class GradientSlots implements AutoCloseable {
  private final Backend backend;
  private final long count;
  private final Map<String, DeviceBuffer> slots = new LinkedHashMap<>();

  public GradientSlots(Backend backend, long count) {
    this.backend = backend;
    this.count = count;
  }

  /** Slots for {@code layers} at {@code maxBatch}: the largest input of any of them, per slot. */
  public static GradientSlots forLayers(Backend backend, List<Layer> layers, int maxBatch) {
    return new GradientSlots(backend, (long) maxBatch * largestInput(layers));
  }

  /** The largest input, per sample, of {@code layers} and everything inside them. */
  public static long largestInput(List<Layer> layers) {
    return layers.stream().mapToLong(Layer::largestInput).max().orElse(0);
  }

  /** {@code layer}'s input gradient of {@code n} floats in slot {@code slot}. */
  DeviceBuffer view(String slot, String layer, long n) {
    if (n > count) {
      throw new IllegalArgumentException(
          layer
              + ": an input gradient of "
              + n
              + " values is larger than the model's gradient slots ("
              + count
              + "; Layer.largestInput declares them)");
    }
    DeviceBuffer b =
        slots.computeIfAbsent(slot, s -> backend.allocate("grad-slot " + s, DType.F32, count));
    return b.view(0, n);
  }

  /** The slots named so far. */
  public Set<String> names() {
    return Set.copyOf(slots.keySet());
  }

  public long bytes() {
    return 4 * count * slots.size();
  }

  @Override
  public void close() {
    slots.values().forEach(DeviceBuffer::close);
    slots.clear();
  }
}
