package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Parameters that take no memory, for layers bound only to measure their activations (a model sized
 * for inference before its weights exist, which may not fit the device at all): every value and
 * buffer is a zero-length buffer, closed with this; no gradients.
 */
final class StandInParameters implements ParameterSource, AutoCloseable {
  private final Backend backend;
  private final List<DeviceBuffer> standIns = new ArrayList<>();

  StandInParameters(Backend backend) {
    this.backend = backend;
  }

  private DeviceBuffer standIn(String name) {
    DeviceBuffer b = backend.allocate(name, DType.F32, 0);
    standIns.add(b);
    return b;
  }

  @Override
  public DeviceBuffer value(String name) {
    return standIn(name);
  }

  @Override
  public DeviceBuffer grad(String name) {
    return null;
  }

  @Override
  public DeviceBuffer buffer(String name) {
    return standIn(name);
  }

  @Override
  public void close() {
    standIns.forEach(DeviceBuffer::close);
    standIns.clear();
  }
}
