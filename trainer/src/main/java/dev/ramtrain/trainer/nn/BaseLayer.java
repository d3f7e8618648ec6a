package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import java.util.ArrayList;
import java.util.List;

/** What every layer shares: its name, its backend once bound, and the activation memory it owns. */
abstract class BaseLayer implements Layer {
  protected final String name;
  protected Backend backend;
  private ParameterSource source; // while binding: where activation memory comes from
  private final List<DeviceBuffer> owned = new ArrayList<>();

  BaseLayer(String name) {
    this.name = name;
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public final void bind(Backend backend, ParameterSource params, int maxBatch) {
    if (this.backend != null) {
      throw new IllegalStateException(name + " is already bound");
    }
    this.backend = backend;
    this.source = params;
    try {
      bind(params, maxBatch);
      ActivationKeys keys = params.activationKeys();
      if (keys != null
          && !keys.placed()) { // a layer without children: where it wrote, or its input
        keys.outputIn(evaluationReturnsInput() ? keys.inputKey() : keys.writeKey());
      }
    } finally {
      this.source = null;
    }
  }

  /** Takes parameter views and allocates activation memory (with {@link #own}). */
  protected abstract void bind(ParameterSource params, int maxBatch);

  /**
   * Whether the layer is being bound for inference: no gradients (its {@link #inputGradient} is
   * null), and nothing kept for a backward that never comes.
   */
  protected boolean inference() {
    return source.activationKeys() != null;
  }

  /** Allocates activation memory this layer owns until it closes. */
  protected DeviceBuffer own(String what, long count) {
    return own(what, DType.F32, count);
  }

  /**
   * Scratch for one call ({@link Layer#scratchBytes} declares it): {@code count} elements of {@code
   * dtype} at byte {@code offset} of the shared workspace, or, bound alone, memory of its own.
   */
  protected DeviceBuffer scratch(String what, DType dtype, long offset, long count) {
    Workspace shared = source.workspace();
    return shared == null ? own(what, dtype, count) : shared.view(name, dtype, offset, count);
  }

  /**
   * Memory for this layer's input gradient ({@code count} floats): a view of the slot its composite
   * named for it ({@link GradientSlots}), which backward's next layer consumes before anything else
   * writes there, or, at the top level and bound alone, memory of its own.
   */
  protected DeviceBuffer inputGradient(long count) {
    if (inference()) {
      return null;
    }
    GradientSlots slots = source.gradientSlots();
    String slot = source.gradientSlot();
    return slots == null || slot == null ? own("dx", count) : slots.view(slot, name, count);
  }

  /**
   * A gradient this layer makes and consumes within its own backward (attention's dL/dqkv): a slot
   * under this layer's path, distinct from its children's, or memory of its own.
   */
  protected DeviceBuffer innerGradient(String what, long count) {
    if (inference()) {
      return null;
    }
    ParameterSource in = source.inputGradientIn(what);
    GradientSlots slots = in.gradientSlots();
    String slot = in.gradientSlot();
    return slots == null || slot == null ? own(what, count) : slots.view(slot, name, count);
  }

  protected DeviceBuffer own(String what, DType dtype, long count) {
    return own(source, what, dtype, count);
  }

  /**
   * Activation memory as {@code from} gives it (a layer bound for inference allocating apart from
   * its output: {@link ActivationKeys#child}), owned by this layer.
   */
  protected DeviceBuffer own(ParameterSource from, String what, DType dtype, long count) {
    DeviceBuffer b = from.activation(backend, name + "." + what, dtype, count);
    owned.add(b);
    return b;
  }

  @Override
  public void close() {
    owned.forEach(DeviceBuffer::close);
    owned.clear();
  }
}
