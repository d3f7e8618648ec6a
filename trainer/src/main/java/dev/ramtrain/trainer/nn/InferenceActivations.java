package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The activation memory of a model bound for inference (PyTorch's {@code torch.no_grad()}): nothing
 * is kept for a backward, so a layer's output lives only until the layers that read it have run.
 * The memory is a few regions, each as large as the most any layer puts in it; where each layer
 * writes is {@link ActivationKeys}'s rule. Built in two passes over two copies of the model's
 * layers: {@link #sizing} binds the first to zero-length buffers and records what each region is
 * asked for, {@link #allocate} makes regions of those sizes, which the second copy binds to.
 */
public final class InferenceActivations implements AutoCloseable {
  /** Every allocation in a region starts at a multiple of this: cache lines and vector loads. */
  static final long ALIGNMENT = 64;

  private final Map<String, Long> sizes;
  private final Map<String, DeviceBuffer> regions; // null while sizing

  private InferenceActivations(Map<String, Long> sizes, Map<String, DeviceBuffer> regions) {
    this.sizes = sizes;
    this.regions = regions;
  }

  /** Memory that records what layers ask of each region and hands out zero-length buffers. */
  public static InferenceActivations sizing() {
    return new InferenceActivations(new LinkedHashMap<>(), null);
  }

  /** Regions of the sizes this sizing recorded, on {@code backend}. */
  public InferenceActivations allocate(Backend backend) {
    Map<String, DeviceBuffer> made = new LinkedHashMap<>();
    try {
      sizes.forEach((key, bytes) -> made.put(key, backend.allocate(key, DType.U8, bytes)));
    } catch (RuntimeException e) {
      made.values().forEach(DeviceBuffer::close);
      throw e;
    }
    return new InferenceActivations(Map.copyOf(sizes), made);
  }

  /** The bytes of every region together. */
  public long bytes() {
    return sizes.values().stream().mapToLong(Long::longValue).sum();
  }

  /** The regions' names, in the order layers first asked for them. */
  public List<String> regions() {
    return new ArrayList<>(sizes.keySet());
  }

  /** {@code count} elements of {@code dtype} at byte {@code offset} of region {@code key}. */
  DeviceBuffer take(
      Backend backend, String key, String label, DType dtype, long offset, long count) {
    long end = offset + count * dtype.bytes();
    if (regions == null) {
      sizes.merge(key, end, Math::max);
      return backend.allocate(label, dtype, 0);
    }
    DeviceBuffer region = regions.get(key);
    if (region == null || end > region.count()) {
      throw new IllegalStateException(
          label
              + ": "
              + end
              + " bytes of inference region "
              + key
              + " asked for, "
              + (region == null ? 0 : region.count())
              + " sized (the layers bound differently than when sized)");
    }
    return region.viewAs(dtype, offset, count);
  }

  @Override
  public void close() {
    if (regions != null) {
      regions.values().forEach(DeviceBuffer::close);
    }
  }
}
