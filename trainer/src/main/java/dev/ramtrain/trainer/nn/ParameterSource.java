package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * Where a layer finds its device memory when it binds: its parameters, their gradients and its
 * buffers (the model's resident slabs, {@link Parameters}, or the weight streamer's fixed slots),
 * and its activation memory.
 */
public interface ParameterSource {
  DeviceBuffer value(String name);

  DeviceBuffer grad(String name);

  DeviceBuffer buffer(String name);

  /**
   * Activation memory for the layer: by default its own allocation. A model that checkpoints
   * activations hands every layer views of one shared arena instead, recomputing a layer's forward
   * right before its backward; what must outlive that is never put there.
   */
  default DeviceBuffer activation(Backend backend, String label, DType dtype, long count) {
    return backend.allocate(label, dtype, count);
  }

  /**
   * The scratch the model's layers share ({@link Workspace}), or null: a layer bound alone (to
   * measure it) allocates its scratch as activation memory of its own.
   */
  default Workspace workspace() {
    return null;
  }

  /**
   * The model's shared input-gradient memory ({@link GradientSlots}), or null: every layer owns its
   * input gradient (a layer bound alone to be timed).
   */
  default GradientSlots gradientSlots() {
    return null;
  }

  /** The slot this source's layer keeps its input gradient in, or null: its own memory. */
  default String gradientSlot() {
    return null;
  }

  /** This source, with {@code shared} as the layers' workspace and {@code slots} as theirs. */
  default ParameterSource sharing(Workspace shared, GradientSlots slots) {
    return new Delegating(this) {
      @Override
      public Workspace workspace() {
        return shared;
      }

      @Override
      public GradientSlots gradientSlots() {
        return slots;
      }
    };
  }

  /**
   * Where the layer puts its activations when the model is bound for inference ({@link
   * ActivationKeys}); null when it binds for training, which also keeps what backward reads.
   */
  default ActivationKeys activationKeys() {
    return null;
  }

  /** This source for a layer bound for inference: its activations where {@code keys} says. */
  default ParameterSource withActivationKeys(ActivationKeys keys) {
    return new Delegating(this) {
      @Override
      public ActivationKeys activationKeys() {
        return keys;
      }

      @Override
      public DeviceBuffer activation(Backend backend, String label, DType dtype, long count) {
        return keys.allocate(backend, label, dtype, count);
      }
    };
  }

  /**
   * The path a composite bound to this source names its children's slots under: its own slot's, or
   * null for a top-level layer, whose children's slots cannot be its own top-level ones.
   */
  default String gradientPath() {
    return gradientSlot();
  }

  /**
   * What a composite layer binds a child to: this source, with the child's input gradient in slot
   * {@code slot} under this source's path (or unchanged where there are no slots).
   */
  default ParameterSource inputGradientIn(String slot) {
    String path = gradientPath() == null ? slot : gradientPath() + ">" + slot;
    return withGradientSlot(path, path);
  }

  /**
   * What a composite bound at the top level binds a child to, giving it a slot of the model's own
   * by exact name ({@code slot}: the composite's own input-gradient slot, or the one its received
   * gradient arrived in once that is consumed), its children's slots named under {@code name}.
   */
  default ParameterSource inputGradientInto(String slot, String name) {
    return withGradientSlot(slot, inputGradientIn(name).gradientPath());
  }

  /**
   * The top-level slot the gradient a top-level layer receives in backward arrives in (the next
   * layer's input gradient), or null for any other source. A composite may name it for its children
   * once it has read that gradient for the last time.
   */
  default String receivedGradientSlot() {
    String own = gradientSlot();
    return own == null || gradientPath() != null || !own.startsWith("top")
        ? null
        : own.equals("top0") ? "top1" : "top0";
  }

  /**
   * What a model binds its top-level layer {@code index} to: this source, with the layer's input
   * gradient in one of two top-level slots by the index's parity (backward's layer i reads layer
   * i+1's gradient while it writes its own), its inner layers' slots named afresh.
   */
  default ParameterSource topLevelGradientIn(int index) {
    return withGradientSlot("top" + index % 2, null);
  }

  /** This source with its layer's gradient in {@code slot}, its children's under {@code path}. */
  private ParameterSource withGradientSlot(String slot, String path) {
    if (gradientSlots() == null) {
      return this; // no slots: every layer owns its gradient
    }
    return new Delegating(this) {
      @Override
      public String gradientSlot() {
        return slot;
      }

      @Override
      public String gradientPath() {
        return path;
      }
    };
  }

  /** Everything from {@code base}: a source that changes one thing overrides that. */
  class Delegating implements ParameterSource {
    private final ParameterSource base;

    public Delegating(ParameterSource base) {
      this.base = base;
    }

    @Override
    public DeviceBuffer value(String name) {
      return base.value(name);
    }

    @Override
    public DeviceBuffer grad(String name) {
      return base.grad(name);
    }

    @Override
    public DeviceBuffer buffer(String name) {
      return base.buffer(name);
    }

    @Override
    public DeviceBuffer activation(Backend backend, String label, DType dtype, long count) {
      return base.activation(backend, label, dtype, count);
    }

    @Override
    public Workspace workspace() {
      return base.workspace();
    }

    @Override
    public GradientSlots gradientSlots() {
      return base.gradientSlots();
    }

    @Override
    public String gradientSlot() {
      return base.gradientSlot();
    }

    @Override
    public String gradientPath() {
      return base.gradientPath();
    }

    @Override
    public ActivationKeys activationKeys() {
      return base.activationKeys();
    }
  }
}
