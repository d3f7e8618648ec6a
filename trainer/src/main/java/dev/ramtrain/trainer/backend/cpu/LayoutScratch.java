package dev.ramtrain.trainer.backend.cpu;

import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Native memory that oneDNN's primitives compute in when the layout they are fastest in (channels
 * blocked by 16, say) is not the backend's NCHW: numbered slots, each grown to the largest tensor
 * put there and reused by every convolution after it, as the operations run one at a time.
 */
final class LayoutScratch implements AutoCloseable {
  private static final int ALIGNMENT = 64; // a cache line, what oneDNN's kernels load best from

  private final List<BytePointer> slots = new ArrayList<>();

  /** Slot {@code index}, at least {@code bytes} long and 64-byte aligned. */
  Pointer slot(int index, long bytes) {
    while (slots.size() <= index) {
      slots.add(null);
    }
    BytePointer held = slots.get(index);
    if (held == null || held.capacity() - ALIGNMENT < bytes) {
      if (held != null) {
        held.close();
      }
      held = new BytePointer(bytes + ALIGNMENT);
      slots.set(index, held);
    }
    long misalignment = held.address() % ALIGNMENT;
    return new BytePointer(held).position(misalignment == 0 ? 0 : ALIGNMENT - misalignment);
  }

  @Override
  public void close() {
    slots.forEach(
        s -> {
          if (s != null) {
            s.close();
          }
        });
    slots.clear();
  }
}
