package dev.ramtrain.trainer;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;

/** Test helpers: device float buffers to and from Java arrays, synchronously. */
public final class DeviceArrays {
  private DeviceArrays() {}

  public static float[] read(Backend b, Stream s, DeviceBuffer d) {
    float[] out = new float[(int) d.count()];
    try (HostBuffer h = b.allocateHost("read", d.bytes())) {
      b.copy(d, h, 0, d.bytes(), s);
      s.synchronize();
      h.asByteBuffer().asFloatBuffer().get(out);
    }
    return out;
  }

  public static void write(Backend b, Stream s, DeviceBuffer d, float[] values) {
    try (HostBuffer h = b.allocateHost("write", 4L * values.length)) {
      h.asByteBuffer().asFloatBuffer().put(values);
      b.copy(h, 0, d, 4L * values.length, s);
      s.synchronize();
    }
  }
}
