package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Bf16;
import dev.ramtrain.trainer.backend.HostBuffer;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;
import java.util.ArrayList;
import java.util.List;
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
  private final boolean[] copiedByUpdate; // per layer: the last update wrote its bf16 copy
  private final long[] gradientShare; // ZeRO-2: the gradients kept, [from, to); null: all
  private final HostBuffer landing; // ZeRO-2: the landing slots; null: gradients land in place
  private final HostBuffer gradientsBf16; // bf16 slots: streamed layers' gradients as they land
  private final long slotElements;
  private final int[] landingSlot; // per layer, ZeRO-2: its landing slot
  private final boolean owner; // false: a node's other device, reading its first device's slabs

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
    this(backend, layout, bf16Copies, publishedCopy, gradients, null);
  }

  /**
   * As above; with a {@code gradientShare} [from, to) (ZeRO-2) the gradient slab holds that share
   * only, and each layer's gradient lands in one of two alternating slots of the largest layer's
   * size, from where the ranks reduce it to its owners.
   */
  HostSlabs(
      Backend backend,
      HostLayout layout,
      boolean bf16Copies,
      boolean publishedCopy,
      boolean gradients,
      long[] gradientShare) {
    this.layout = layout;
    this.owner = true;
    this.stale = new boolean[layout.layers()];
    this.copiedByUpdate = new boolean[layout.layers()];
    this.landingSlot = new int[layout.layers()];
    long n = layout.parameters();
    boolean zero2 = gradients && gradientShare != null;
    this.gradientShare = zero2 ? gradientShare : null;
    long largest = 0;
    int sent = 0;
    for (int i = layout.layers() - 1; i >= 0; i--) { // in the order backward sends them
      largest = Math.max(largest, layout.count(i));
      landingSlot[i] = zero2 && layout.count(i) > 0 ? sent++ % LANDING_SLOTS : -1;
    }
    this.slotElements = zero2 ? largest : 0;
    List<HostBuffer> made = new ArrayList<>(); // closed again if a later one cannot be had
    try {
      this.masters = made(made, backend.allocateHost("masters", 4 * n));
      this.bf16 =
          bf16Copies
              ? made(made, backend.allocateHost("masters-bf16", 2 * layout.streamedParameters()))
              : null;
      this.published =
          publishedCopy ? made(made, backend.allocateHost("published-weights", 4 * n)) : null;
      long kept = zero2 ? gradientShare[1] - gradientShare[0] : n;
      this.gradients =
          gradients ? made(made, backend.allocateHost("host-gradients", 4 * kept)) : null;
      this.landing =
          zero2
              ? made(made, backend.allocateHost("gradient-landing", 4 * largest * LANDING_SLOTS))
              : null;
      // bf16 slots: the streamed layers' gradients cross the bus in bf16 too, widened on the host
      // (ZeRO-2 lands fp32 gradients in its slots).
      this.gradientsBf16 =
          gradients && bf16Copies && !zero2
              ? made(
                  made,
                  backend.allocateHost("host-gradients-bf16", 2 * layout.streamedParameters()))
              : null;
    } catch (RuntimeException e) {
      made.forEach(HostBuffer::close);
      throw e;
    }
  }

  private static HostBuffer made(List<HostBuffer> made, HostBuffer buffer) {
    made.add(buffer);
    return buffer;
  }

  /**
   * A node's other device's view of {@code first}'s slabs ({@link DeviceGroup}): it loads the same
   * masters and bf16 copies, which only {@code first} writes, and lands each layer's gradient in
   * one of two slots of its own (allocated on {@code backend}), from where the node's first device
   * adds it to the node's gradient; it keeps no gradient slab.
   */
  static HostSlabs sharing(Backend backend, HostSlabs first) {
    return new HostSlabs(backend, first);
  }

  private HostSlabs(Backend backend, HostSlabs first) {
    this.owner = false;
    this.layout = first.layout;
    this.masters = first.masters;
    this.bf16 = first.bf16;
    this.published = first.published;
    this.gradients = null;
    this.stale = new boolean[layout.layers()];
    this.copiedByUpdate = new boolean[layout.layers()];
    this.landingSlot = new int[layout.layers()];
    this.gradientShare = new long[] {0, 0};
    long largest = 0;
    int sent = 0;
    for (int i = layout.layers() - 1; i >= 0; i--) {
      largest = Math.max(largest, layout.count(i));
      landingSlot[i] = layout.count(i) > 0 ? sent++ % LANDING_SLOTS : -1;
    }
    this.slotElements = largest;
    List<HostBuffer> made = new ArrayList<>();
    try {
      this.landing =
          made(made, backend.allocateHost("gradient-landing", 4 * largest * LANDING_SLOTS));
      // bf16 slots: streamed layers' gradients cross the bus in bf16 as device 0's do, widened
      // into the fp32 slot before they are handed over (the node's sum adds like roundings).
      this.gradientsBf16 =
          first.gradientsBf16 != null
              ? made(
                  made, backend.allocateHost("gradient-landing-bf16", 2 * largest * LANDING_SLOTS))
              : null;
    } catch (RuntimeException e) {
      made.forEach(HostBuffer::close);
      throw e;
    }
  }

  /** Whether this is the slabs' owner, not a node's other device's view of them. */
  boolean owner() {
    return owner;
  }

  /** ZeRO-2's landing slots: one layer's gradient lands while the last one is reduced. */
  static final int LANDING_SLOTS = 2;

  HostBuffer masters() {
    return masters;
  }

  /** The gradients kept: every parameter's, or (ZeRO-2) the share's, from its first element. */
  HostBuffer gradients() {
    return gradients;
  }

  /**
   * Whether streamed layer i's gradient lands in bf16 (bf16 slots without ZeRO-2), to be {@link
   * #widenGradient widened} into the gradient slab before anything reads it there.
   */
  boolean landsBf16(int i) {
    return gradientsBf16 != null && layout.streamed(i);
  }

  /** The bf16 gradients of the streamed layers, in the bf16 copy's layout; null without. */
  HostBuffer gradientsBf16() {
    return gradientsBf16;
  }

  /**
   * Widens streamed layer i's landed bf16 gradient into its place in the gradient slab (a node's
   * other device: into its fp32 landing slot).
   */
  void widenGradient(int i) {
    HostAdamWKernel.widen(
        gradientsBf16.address() + bf16LandingOffset(i),
        landingOf(i).address() + landingOffset(i),
        Math.toIntExact(layout.count(i)));
  }

  /**
   * The byte offset in {@link #gradientsBf16} where streamed layer i's bf16 gradient lands: its
   * place in the bf16 copy's layout, or (a node's other device) its slot.
   */
  long bf16LandingOffset(int i) {
    return owner ? 2 * layout.bf16At(i) : 2 * slotElements * landingSlot[i];
  }

  /** Where layer i's gradient lands: the gradient slab, or (ZeRO-2) its landing slot. */
  HostBuffer landingOf(int i) {
    return landing != null ? landing : gradients;
  }

  /** The byte offset in {@link #landingOf} where layer i's gradient lands. */
  long landingOffset(int i) {
    return landing != null ? 4 * slotElements * landingSlot[i] : 4 * layout.offset(i);
  }

  /** ZeRO-2: layer i's landing slot; -1 where gradients land in place. */
  int landingSlot(int i) {
    return landing != null ? landingSlot[i] : -1;
  }

  /** ZeRO-2: the share [from, to) of the gradients kept; null where all are. */
  long[] gradientShare() {
    return gradientShare;
  }

  /** The bf16 copy of the streamed layers' masters, or null without bf16 slots. */
  HostBuffer bf16() {
    return bf16;
  }

  /** Where fp32 loads and uploads read: the published weights with a delayed update. */
  HostBuffer weightSource() {
    return published != null ? published : masters;
  }

  /**
   * Where an update writes the bf16 copies of what it updates, in its own pass ({@link
   * Bf16Copies#NONE} without bf16 slots): refreshing a layer's copies after such an update then
   * leaves its bf16 copy as the update wrote it.
   */
  Bf16Copies updateCopies() {
    if (bf16 == null) {
      return Bf16Copies.NONE;
    }
    return new Bf16Copies() {
      @Override
      public void forEachRun(int from, int to, Run run) {
        int runStart = from;
        for (int i = 0; i < layout.layers() && runStart < to; i++) {
          long start = layout.offset(i);
          long end = start + layout.count(i);
          if (!layout.streamed(i) || end <= runStart || start >= to) {
            continue;
          }
          int a = (int) Math.max(start, runStart);
          int b = (int) Math.min(end, to);
          if (a > runStart) {
            run.accept(runStart, a, -1);
          }
          if (start >= from && end <= to) {
            copiedByUpdate[i] = true;
          }
          run.accept(a, b, layout.bf16At(i) + (a - start));
          runStart = b;
        }
        if (runStart < to) {
          run.accept(runStart, to, -1);
        }
      }

      @Override
      public long address() {
        return bf16.address();
      }
    };
  }

  /**
   * Says layer i's masters changed without its copies following (restored or swapped weights, a
   * ZeRO-1 gather): its bf16 copy is narrowed again, whatever an update wrote before.
   */
  void markStale(int i) {
    stale[i] = true;
    copiedByUpdate[i] = false;
  }

  /**
   * Says layer i's masters changed by an update after backward (serial or redone), which wrote the
   * bf16 copies {@link #updateCopies} gave it: only the published weights lag.
   */
  void markUpdated(int i) {
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
    if (!owner) {
      return; // the copies are the node's first device's to write
    }
    long from = layout.offset(i);
    long count = layout.count(i);
    if (published != null) {
      MemoryUtil.copyMemory(
          masters.address() + 4 * from, published.address() + 4 * from, 4 * count);
    }
    stale[i] = false;
    boolean copied = copiedByUpdate[i];
    copiedByUpdate[i] = false;
    if (bf16 == null || !layout.streamed(i) || copied) {
      return;
    }
    FloatBuffer src = masters.floats(from, count);
    ShortBuffer dst = bf16.range(2 * layout.bf16At(i), 2 * count).asShortBuffer();
    for (int e = 0; e < count; e++) {
      dst.put(e, Bf16.fromFloat(src.get(e)));
    }
  }

  @Override
  public void close() {
    if (!owner) {
      landing.close();
      if (gradientsBf16 != null) {
        gradientsBf16.close();
      }
      return;
    }
    masters.close();
    if (gradients != null) {
      gradients.close();
    }
    if (landing != null) {
      landing.close();
    }
    if (gradientsBf16 != null) {
      gradientsBf16.close();
    }
    if (bf16 != null) {
      bf16.close();
    }
    if (published != null) {
      published.close();
    }
  }
}
