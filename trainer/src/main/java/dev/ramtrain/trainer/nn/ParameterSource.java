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

  /** This source, with {@code shared} as the layers' workspace. */
  default ParameterSource sharing(Workspace shared) {
    return new Delegating(this) {
      @Override
      public Workspace workspace() {
        return shared;
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
  }
}
