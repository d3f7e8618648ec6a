package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Convert;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The device weight ring of streamed layers: {@code k} fixed slots, streamed layer j always in slot
 * {@code j mod k}, loaded on the copy-in stream. A slot is reloaded only after its previous user
 * has computed ({@code free} event, recorded on the compute stream) and used only after its load
 * ({@code loaded} event). With bf16 slots a layer's slot is widened into one fp32 working buffer
 * right before it computes, which frees the slot at once.
 */
final class WeightRing implements AutoCloseable {
  private final Backend backend;
  private final HostLayout layout;
  private final HostSlabs slabs;
  private final StepTimeline timeline;
  private final Stream copyIn;
  private final List<DeviceBuffer> slots = new ArrayList<>();
  private final DeviceBuffer working; // bf16 slots: the fp32 weights of the layer computing
  private final int[] holds; // which streamed ordinal each slot holds (as enqueued), or -1
  private final Event[] free;
  private final Event[] loaded;

  WeightRing(
      Backend backend, HostLayout layout, HostSlabs slabs, int depth, StepTimeline timeline) {
    this.backend = backend;
    this.layout = layout;
    this.slabs = slabs;
    this.timeline = timeline;
    boolean bf16 = slabs.bf16() != null;
    int k = Math.min(depth, layout.streamedCount());
    long largest = layout.largestStreamed();
    for (int s = 0; s < k; s++) {
      slots.add(backend.allocate("weight-slot." + s, bf16 ? DType.BF16 : DType.F32, largest));
    }
    this.working = bf16 ? backend.allocate("weight-working", DType.F32, largest) : null;
    this.copyIn = backend.createStream("weights-in");
    this.holds = new int[k];
    Arrays.fill(holds, -1);
    this.free = new Event[k];
    this.loaded = new Event[k];
    for (int s = 0; s < k; s++) {
      free[s] = backend.createEvent("weight-slot.free." + s);
      loaded[s] = backend.createEvent("weight-slot.loaded." + s);
    }
  }

  /** Slots in the ring. */
  int depth() {
    return slots.size();
  }

  /** The copy-in stream (resident layers' uploads share it). */
  Stream copyStream() {
    return copyIn;
  }

  /** The device buffer streamed layer {@code j} binds its weights to. */
  DeviceBuffer weightsOf(int j) {
    return working != null ? working : slots.get(j % slots.size());
  }

  /** Enqueues streamed layer j's weights into its slot unless the slot already holds them. */
  void load(int j) {
    int s = j % slots.size();
    if (holds[s] == j) {
      return;
    }
    int i = layout.streamedLayer(j);
    copyIn.waitFor(free[s]); // after the slot's previous user has computed (or widened it)
    int k = timeline.begin(StepTimeline.Lane.COPY_IN, copyIn);
    DeviceBuffer slot = slots.get(s).view(0, layout.count(i));
    if (slabs.bf16() != null) {
      backend.copy(slabs.bf16(), 2 * layout.bf16At(i), slot, slot.bytes(), copyIn);
    } else {
      backend.copy(slabs.weightSource(), 4 * layout.offset(i), slot, slot.bytes(), copyIn);
    }
    timeline.end(StepTimeline.Lane.COPY_IN, k, copyIn, slot.bytes());
    loaded[s].record(copyIn);
    holds[s] = j;
  }

  /**
   * Before top-level layer i (streamed) computes forward: enqueues its weights and the next ones
   * the ring has room for, then makes its own usable on {@code compute}.
   */
  void prepareForward(Stream compute, int i) {
    int j = layout.ordinal(i);
    for (int ahead = j; ahead < Math.min(layout.streamedCount(), j + depth()); ahead++) {
      load(ahead);
    }
    use(compute, i);
  }

  /**
   * Makes streamed layer i's weights usable on the compute stream: waits for its slot's load, and
   * with bf16 slots widens it into the fp32 working buffer, after which the slot may be reloaded.
   */
  void use(Stream compute, int i) {
    int s = layout.ordinal(i) % slots.size();
    compute.waitFor(loaded[s]);
    if (working != null) {
      backend.run(
          compute,
          new Convert(slots.get(s).view(0, layout.count(i)), working.view(0, layout.count(i))));
      free[s].record(compute);
    }
  }

  /** Says streamed layer j's compute has been enqueued: its slot may be reloaded after it. */
  void release(Stream compute, int j) {
    if (working == null) {
      free[j % slots.size()].record(compute);
    }
  }

  /** Forgets what the slots hold: the masters changed, so every streamed layer loads again. */
  void forget() {
    Arrays.fill(holds, -1);
  }

  /** Blocks until every load enqueued so far has run. */
  void synchronize() {
    copyIn.synchronize();
  }

  @Override
  public void close() {
    copyIn.synchronize();
    copyIn.close(); // its own: a CUDA stream holds device scratch until closed
    slots.forEach(DeviceBuffer::close);
    if (working != null) {
      working.close();
    }
    for (int s = 0; s < free.length; s++) {
      free[s].close();
      loaded[s].close();
    }
  }
}
