package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Event;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Convert;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.ArrayList;
import java.util.List;

/**
 * The way gradients leave the device: streamed layers compute theirs into two alternating gradient
 * slots (streamed layer j in slot {@code j mod 2}), resident layers into the resident slab; as soon
 * as a layer's backward is done its gradient is copied into the host gradient slab (ZeRO-2: a
 * landing slot) on the copy-out stream; with bf16 slots a streamed layer's gradient is rounded to
 * bf16 on the device first and crosses in half the bytes. Per layer, {@link #done} marks its
 * backward and {@link #onHost} its gradient in the host slab (what the host update waits for).
 */
final class GradientReturn implements AutoCloseable {
  private final Backend backend;
  private final HostLayout layout;
  private final HostSlabs slabs;
  private final Parameters resident;
  private final StepTimeline timeline;
  private final Stream copyOut;
  private final List<DeviceBuffer> slots = new ArrayList<>();
  private final List<DeviceBuffer> bf16Slots = new ArrayList<>(); // bf16 slots: what crosses
  private final Event[] returned; // per slot: its last copy to the host is done
  private final Event[] done; // per layer: its backward is done (compute stream)
  private final Event[] onHost; // per layer: its gradient is in the host slab

  GradientReturn(
      Backend backend,
      HostLayout layout,
      HostSlabs slabs,
      Parameters resident,
      StepTimeline timeline) {
    this.backend = backend;
    this.layout = layout;
    this.slabs = slabs;
    this.resident = resident;
    this.timeline = timeline;
    for (int s = 0; s < Math.min(2, layout.streamedCount()); s++) {
      slots.add(backend.allocate("grad-slot." + s, DType.F32, layout.largestStreamed()));
      if (slabs.gradientsBf16() != null) {
        bf16Slots.add(
            backend.allocate("grad-slot-bf16." + s, DType.BF16, layout.largestStreamed()));
      }
    }
    this.copyOut = backend.createStream("gradients-out");
    this.returned = new Event[slots.size()];
    for (int s = 0; s < returned.length; s++) {
      returned[s] = backend.createEvent("grad-slot.returned." + s);
    }
    int n = layout.layers();
    this.done = new Event[n];
    this.onHost = new Event[n];
    for (int i = 0; i < n; i++) {
      done[i] = backend.createEvent("grad.done." + i);
      onHost[i] = backend.createEvent("grad.on-host." + i);
    }
  }

  /** The device buffer streamed layer {@code j} binds its gradients to. */
  DeviceBuffer slotOf(int j) {
    return slots.get(j % slots.size());
  }

  /** Makes the compute stream wait until streamed layer j's slot has sent its last gradient. */
  void awaitSlot(Stream compute, int j) {
    compute.waitFor(returned[j % slots.size()]);
  }

  /** Zeroes streamed layer i's gradient slot (its backward accumulates into it). */
  void zeroSlot(Stream compute, int i) {
    backend.run(compute, new Fill(slotOf(layout.ordinal(i)).view(0, layout.count(i)), 0f));
  }

  /** Copies layer i's gradient to the host slab on the copy-out stream once backward made it. */
  void send(Stream compute, int i) {
    int j = layout.ordinal(i);
    long count = layout.count(i);
    boolean bf16 = slabs.landsBf16(i);
    DeviceBuffer narrowed = bf16 ? bf16Slots.get(j % slots.size()).view(0, count) : null;
    if (bf16) { // rounded as the weights are: half the bytes cross
      backend.run(compute, new Convert(slotOf(j).view(0, count), narrowed));
    }
    done[i].record(compute);
    copyOut.waitFor(done[i]);
    DeviceBuffer source =
        j >= 0 ? slotOf(j).view(0, count) : resident.grads().view(layout.residentAt(i), count);
    int k = timeline.begin(StepTimeline.Lane.COPY_OUT, copyOut);
    if (bf16) {
      backend.copy(narrowed, slabs.gradientsBf16(), slabs.bf16LandingOffset(i), 2 * count, copyOut);
    } else {
      backend.copy(source, slabs.landingOf(i), slabs.landingOffset(i), 4 * count, copyOut);
    }
    timeline.end(StepTimeline.Lane.COPY_OUT, k, copyOut, (bf16 ? 2 : 4) * count);
    onHost[i].record(copyOut);
    if (j >= 0) {
      returned[j % slots.size()].record(copyOut);
    }
  }

  /** Layer i's backward is done (recorded on the compute stream). */
  Event done(int i) {
    return done[i];
  }

  /** Layer i's gradient is in the host slab (recorded on the copy-out stream). */
  Event onHost(int i) {
    return onHost[i];
  }

  /** Blocks until every gradient copy enqueued so far has run. */
  void synchronize() {
    copyOut.synchronize();
  }

  @Override
  public void close() {
    copyOut.synchronize();
    copyOut.close(); // its own: a CUDA stream holds device scratch until closed
    slots.forEach(DeviceBuffer::close);
    bf16Slots.forEach(DeviceBuffer::close);
    for (Event e : returned) {
      e.close();
    }
    for (int i = 0; i < done.length; i++) {
      done[i].close();
      onHost[i].close();
    }
  }
}
