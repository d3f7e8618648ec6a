package dev.ramtrain.trainer.nn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The inference arena's plan: writes alive together never share bytes, a dead value's bytes are
 * written again, and a backend's largest allocation splits the arena (the CPU backend's 2 GiB, here
 * a few hundred bytes) or refuses a write larger than it, naming the layer.
 */
class InferenceActivationsTest {
  /** Three 100-byte values alive together, then a fourth once the first two are dead. */
  private static InferenceActivations record(Backend b, long largest) {
    InferenceActivations m = InferenceActivations.sizing(largest);
    write(b, m, "first", "a", Set.of(), 100);
    write(b, m, "second", "b", Set.of("a"), 100);
    write(b, m, "third", "c", Set.of("a", "b"), 100);
    write(b, m, "fourth", "a", Set.of("c"), 100);
    return m;
  }

  private static void write(
      Backend b, InferenceActivations m, String layer, String key, Set<String> live, long bytes) {
    int w = m.begin(layer, key, live);
    m.take(b, w, layer + ".out", DType.U8, 0, bytes).close();
  }

  @Test
  void valuesAliveTogetherGetTheirOwnBytesAndDeadOnesAreReused() {
    try (Backend b = new CpuBackend(1)) {
      // 0, 128 and 256 (64-byte aligned); the fourth reuses the first's or the second's bytes
      assertEquals(356, record(b, Long.MAX_VALUE).bytes());
    }
  }

  @Test
  void theLargestAllocationSplitsTheArena() {
    try (Backend b = new CpuBackend(1)) {
      InferenceActivations sized = record(b, 250);
      assertEquals(228 + 100, sized.bytes(), "two writes in the first arena, one in a second");
      long before = b.allocatedBytes();
      try (InferenceActivations arenas = sized.allocate(b)) {
        assertEquals(328, b.allocatedBytes() - before);
        write(b, arenas, "first", "a", Set.of(), 100); // the plan's writes, bound in order
        write(b, arenas, "second", "b", Set.of("a"), 100);
        write(b, arenas, "third", "c", Set.of("a", "b"), 100);
        write(b, arenas, "fourth", "a", Set.of("c"), 100);
      }
      OutOfDeviceMemoryException e =
          assertThrows(OutOfDeviceMemoryException.class, () -> record(b, 99).bytes());
      assertTrue(e.getMessage().startsWith("first's activations take"), e.getMessage());
      assertTrue(e.getMessage().contains("--batch-size"), e.getMessage());
    }
  }
}
