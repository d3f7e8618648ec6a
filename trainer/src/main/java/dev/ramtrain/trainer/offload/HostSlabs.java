package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.HostBuffer;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * An offloaded model's pinned host memory, allocated once in {@link HostLayout}'s order: the fp32
 * master weights, their gradients, and two optional copies of the masters that the device reads
 * instead: bf16 roundings of the streamed layers (bf16 slots) and the published weights (delayed
 * update: what steps compute with while the masters are being updated).
 */
final class HostSlabs implements AutoCloseable {
  private final HostLayout layout;
  private final HostBuffer masters;
  private final HostBuffer gradients;
  private final HostBuffer bf16; // or null
  private final HostBuffer published; // or null
  private final boolean[] stale; // per layer: its copies lag its masters

  HostSlabs(Backend backend, HostLayout layout, boolean bf16Copies, boolean publishedCopy) {
    this(backend, layout, bf16Copies, publishedCopy, true);
  }

  /** As above; without {@code gradients} (a model only evaluated) no gradient slab. */
  HostSlabs(
      Backend backend,
      HostLayout layout,
      boolean bf16Copies,
      boolean publishedCopy,
      boolean gradients) {
    this.layout = layout;
    this.stale = new boolean[layout.layers()];
    long n = layout.parameters();
    this.masters = backend.allocateHost("masters", 4 * n);
    this.bf16 =
        bf16Copies ? backend.allocateHost("masters-bf16", 2 * layout.streamedParameters()) : null;
    this.published = publishedCopy ? backend.allocateHost("published-weights", 4 * n) : null;
    this.gradients = gradients ? backend.allocateHost("host-gradients", 4 * n) : null;
  }

  HostBuffer masters() {
    return masters;
  }

  HostBuffer gradients() {
    return gradients;
  }

  /** The bf16 copy of the streamed layers' masters, or null without bf16 slots. */
  HostBuffer bf16() {
    return bf16;
  }

  /** Where fp32 loads and uploads read: the published weights with a delayed update. */
  HostBuffer weightSource() {
    return published != null ? published : masters;
  }

  /** Says layer i's masters changed without its copies following (a restore, a serial update). */
  void markStale(int i) {
    stale[i] = true;
  }

  boolean stale(int i) {
    return stale[i];
  }

  /**
   * Brings layer i's copies up to its masters: the published weights (delayed update) and the bf16
   * copy of a streamed layer (bf16 slots).
   */
  void refreshCopies(int i) {
    long from = layout.offset(i);
    long count = layout.count(i);
    if (published != null) {
      MemoryUtil.copyMemory(
          masters.address() + 4 * from, published.address() + 4 * from, 4 * count);
    }
    stale[i] = false;
    if (bf16 == null || !layout.streamed(i)) {
      return;
    }
    FloatBuffer src = masters.asByteBuffer().asFloatBuffer();
    ShortBuffer dst = bf16.asByteBuffer().asShortBuffer();
    int s = (int) from;
    int d = (int) layout.bf16At(i);
    for (int e = 0; e < count; e++) {
      dst.put(d + e, Bf16.fromFloat(src.get(s + e)));
    }
  }

  @Override
  public void close() {
    masters.close();
    if (gradients != null) {
      gradients.close();
    }
    if (bf16 != null) {
      bf16.close();
    }
    if (published != null) {
      published.close();
    }
  }
}
