package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.DeviceBuffer;

/**
 * Where a layer finds the device memory of its parameters, their gradients and its buffers when it
 * binds: the model's resident slabs ({@link Parameters}), or the weight streamer's fixed slots.
 */
public interface ParameterSource {
  DeviceBuffer value(String name);

  DeviceBuffer grad(String name);

  DeviceBuffer buffer(String name);
}
