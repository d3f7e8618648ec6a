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
}
