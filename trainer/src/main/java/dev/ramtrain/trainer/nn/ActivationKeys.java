package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import java.util.HashSet;
import java.util.Objects;
import java.util.Set;

/**
 * Where one layer bound for inference puts its activations ({@link InferenceActivations}): all of
 * them, output and temporaries alike, in one region from byte 0, the lowest-numbered region that
 * holds nothing still to be read. Still to be read are the layer's input and whatever its enclosing
 * composites will read after it: a residual's input (added at its end), a residual block's
 * main-branch output while its shortcut runs. A layer that returns its input (an in-place ReLU,
 * dropout when evaluating) leaves its output in its input's region; a composite says which region
 * its output ended in ({@link #outputIn}). A ResNet so needs four regions, an input and three
 * working ones, the most activations autograd-free PyTorch holds at once in a bottleneck.
 */
public final class ActivationKeys {
  private final InferenceActivations memory;
  private final String input; // the region the layer's input is in; null: not the model's memory
  private final Set<String> live;
  private String output;
  private boolean placed;
  private long bytes; // what the layer has put in its region so far

  private ActivationKeys(InferenceActivations memory, String input, Set<String> live) {
    this.memory = memory;
    this.input = input;
    this.live = live;
  }

  /** The first top-level layer's: its input is the caller's, nothing in the regions is live. */
  public static ActivationKeys first(InferenceActivations memory) {
    return new ActivationKeys(memory, null, Set.of());
  }

  /** The next top-level layer's, reading this one's output: all else is free again. */
  public ActivationKeys next() {
    return new ActivationKeys(memory, output, output == null ? Set.of() : Set.of(output));
  }

  /**
   * A child's of this composite: it reads {@code childInput}; the composite's own input and {@code
   * alsoLive} stay to be read after it.
   */
  public ActivationKeys child(String childInput, Set<String> alsoLive) {
    Set<String> kept = liveWith(alsoLive, input);
    if (childInput != null) {
      kept.add(childInput);
    }
    return new ActivationKeys(memory, childInput, Set.copyOf(kept));
  }

  private Set<String> liveWith(Set<String> more, String key) {
    Set<String> all = new HashSet<>(live);
    all.addAll(more);
    if (key != null) {
      all.add(key);
    }
    return all;
  }

  /** The region the layer's input is in, or null: the caller's memory. */
  public String inputKey() {
    return input;
  }

  /** The region the layer writes: the lowest-numbered one holding nothing still to be read. */
  public String writeKey() {
    for (int i = 0; ; i++) {
      String key = "activations-" + i;
      if (!live.contains(key)) {
        return key;
      }
    }
  }

  /** Where the bound layer's output is ({@link #writeKey} or {@link #inputKey}). */
  public void outputIn(String key) {
    output = key;
    placed = true;
  }

  /** The region the bound layer's output is in; null until bound, or the caller's memory. */
  public String outputKey() {
    return output;
  }

  /** Whether the bound layer has said where its output is. */
  boolean placed() {
    return placed;
  }

  /** Memory for the layer's next activation: after its others, in {@link #writeKey}. */
  DeviceBuffer allocate(Backend backend, String label, DType dtype, long count) {
    long at = (bytes + InferenceActivations.ALIGNMENT - 1) / InferenceActivations.ALIGNMENT;
    at *= InferenceActivations.ALIGNMENT;
    bytes = at + count * dtype.bytes();
    return memory.take(backend, writeKey(), label, dtype, at, count);
  }

  @Override
  public String toString() {
    return "reads " + Objects.requireNonNullElse(input, "the caller's input") + ", keeps " + live;
  }
}
