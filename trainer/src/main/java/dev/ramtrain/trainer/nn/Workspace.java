package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Scratch memory a model's layers share: what a layer needs only within one forward or backward
 * call and keeps for none (a convolution's im2col columns, its bf16 operands), as cuDNN's
 * workspace. Layers run one at a time on the stream, so one buffer sized for the largest need
 * serves them all; each layer takes views of it from byte 0 ({@link Layer#scratchBytes}).
 */
public final class Workspace implements AutoCloseable {
  private final DeviceBuffer bytes; // null: a stand-in while layers are bound to be measured
  private final Backend backend;
  private final List<DeviceBuffer> standIns = new ArrayList<>();

  private Workspace(DeviceBuffer bytes, Backend backend) {
    this.bytes = bytes;
    this.backend = backend;
  }

  /** A workspace for the largest scratch {@code layers} declare at {@code maxBatch}. */
  public static Workspace forLayers(Backend backend, List<Layer> layers, int maxBatch) {
    long most = layers.stream().mapToLong(l -> l.scratchBytes(backend, maxBatch)).max().orElse(0);
    return new Workspace(backend.allocate("workspace", DType.U8, most), backend);
  }

  /**
   * A workspace that allocates nothing, for layers bound only to measure their other memory: each
   * view is a zero-length buffer, closed with it.
   */
  public static Workspace standIn(Backend backend) {
    return new Workspace(null, backend);
  }

  /** {@code count} elements of {@code dtype} from byte {@code offset}. */
  DeviceBuffer view(String layer, DType dtype, long offset, long count) {
    if (bytes == null) {
      DeviceBuffer standIn = backend.allocate(layer + ".scratch", dtype, 0);
      standIns.add(standIn);
      return standIn;
    }
    if (offset < 0
        || offset % dtype.bytes() != 0
        || offset + count * dtype.bytes() > bytes.count()) {
      throw new IllegalArgumentException(
          layer
              + ": scratch of "
              + count
              + " "
              + dtype
              + " at byte "
              + offset
              + " is beyond the workspace's "
              + bytes.count()
              + " bytes (declared by Layer.scratchBytes)");
    }
    return bytes.viewAs(dtype, offset, count);
  }

  public long bytes() {
    return bytes == null ? 0 : bytes.count();
  }

  @Override
  public void close() {
    standIns.forEach(DeviceBuffer::close);
    standIns.clear();
    if (bytes != null) {
      bytes.close();
    }
  }
}
