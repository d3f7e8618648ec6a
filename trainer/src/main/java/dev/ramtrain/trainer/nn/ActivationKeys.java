package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import java.util.HashSet;
import java.util.Objects;
import java.util.Set;

/**
 * Which value one layer bound for inference writes ({@link InferenceActivations}), and which values
 * are still to be read while it does: its input, and whatever its enclosing composites read after
 * it (a residual's input, added at its end; a residual block's main-branch output while its
 * shortcut runs). All of a layer's activations, output and temporaries alike, are one write; its
 * output is then that value, or, for a layer that returns its input (an in-place ReLU, dropout when
 * evaluating), its input's; a composite says which of its children's values its output is ({@link
 * #outputIn}). Values are named {@code activations-N}, a layer writing the lowest-numbered one not
 * still to be read.
 */
public final class ActivationKeys {
  private final InferenceActivations memory;
  private final String input; // the value the layer reads; null: not in the model's memory
  private final Set<String> live;
  private final boolean inputReadLater; // by a layer after this one
  private String output;
  private boolean placed;
  private long bytes; // what the layer has put in its write so far
  private int write = -1; // its write, once it has allocated

  private ActivationKeys(
      InferenceActivations memory, String input, Set<String> live, boolean inputReadLater) {
    this.memory = memory;
    this.input = input;
    this.live = live;
    this.inputReadLater = inputReadLater;
  }

  /** The first top-level layer's: its input is the caller's, no value is still to be read. */
  public static ActivationKeys first(InferenceActivations memory) {
    return new ActivationKeys(memory, null, Set.of(), true);
  }

  /** The next top-level layer's, reading this one's output: all else is free again. */
  public ActivationKeys next() {
    return new ActivationKeys(
        memory, output, output == null ? Set.of() : Set.of(output), output == null);
  }

  /**
   * A child's of this composite: it reads {@code childInput}; the composite's own input and {@code
   * alsoLive} stay to be read after it.
   */
  public ActivationKeys child(String childInput, Set<String> alsoLive) {
    Set<String> kept = liveWith(alsoLive, input);
    boolean readLater = childInput == null || kept.contains(childInput);
    if (childInput != null) {
      kept.add(childInput);
    }
    return new ActivationKeys(memory, childInput, Set.copyOf(kept), readLater);
  }

  private Set<String> liveWith(Set<String> more, String key) {
    Set<String> all = new HashSet<>(live);
    all.addAll(more);
    if (key != null) {
      all.add(key);
    }
    return all;
  }

  /** The value the layer's input is, or null: the caller's memory. */
  public String inputKey() {
    return input;
  }

  /**
   * Whether a layer after this one reads this one's input (or it is the caller's): if not, the
   * layer may write its output over it (an element-wise activation).
   */
  public boolean inputReadLater() {
    return inputReadLater;
  }

  /** The value the layer writes: the lowest-numbered one not still to be read. */
  public String writeKey() {
    for (int i = 0; ; i++) {
      String key = "activations-" + i;
      if (!live.contains(key)) {
        return key;
      }
    }
  }

  /** Which value the bound layer's output is ({@link #writeKey} or {@link #inputKey}). */
  public void outputIn(String key) {
    output = key;
    placed = true;
  }

  /** The value the bound layer's output is; null until bound, or the caller's memory. */
  public String outputKey() {
    return output;
  }

  /** Whether the bound layer has said where its output is. */
  boolean placed() {
    return placed;
  }

  /** Memory for the layer's next activation: after its others, in its write. */
  DeviceBuffer allocate(Backend backend, String label, DType dtype, long count) {
    if (write < 0) {
      write = memory.begin(label, writeKey(), live);
    }
    long at = InferenceActivations.align(bytes);
    bytes = at + count * dtype.bytes();
    return memory.take(backend, write, label, dtype, at, count);
  }

  @Override
  public String toString() {
    return "reads " + Objects.requireNonNullElse(input, "the caller's input") + ", keeps " + live;
  }
}
