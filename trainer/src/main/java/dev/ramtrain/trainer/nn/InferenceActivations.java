package dev.ramtrain.trainer.nn;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.ByteSize;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.OutOfDeviceMemoryException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Set;

/**
 * The activation memory of a model bound for inference (PyTorch's {@code torch.no_grad()}): nothing
 * is kept for a backward, so a layer's output lives only until the layers that read it have run.
 * One arena holds it all. Each layer's activations, output and temporaries together, are one
 * <em>write</em> into a named value ({@link ActivationKeys} says which, and which values are still
 * to be read then); writes whose lives overlap get disjoint bytes (planned greedy-by-size), so the
 * arena is about as large as the most that is live at once; a backend whose allocations are bounded
 * (the CPU backend's, at 2 GiB) gets several arenas, each write inside one. Built in two passes
 * over two copies of the model's layers: {@link #sizing} binds the first to zero-length buffers and
 * records the writes in order, {@link #allocate} places them and makes the arena, which the second
 * copy binds to, write by write.
 */
public final class InferenceActivations implements AutoCloseable {
  /** Every write starts at a multiple of this, as does each allocation within one. */
  static final long ALIGNMENT = 64;

  /** One layer's write: into which value, how many bytes, with which values still to be read. */
  private record Write(String layer, String key, long bytes, Set<String> live) {}

  /** Where the writes go: write i at {@code offsets[i]} of arena {@code arenaOf[i]}. */
  private record WritePlan(int[] arenaOf, long[] offsets, long[] arenaBytes) {
    long bytes() {
      return Arrays.stream(arenaBytes).sum();
    }
  }

  private final List<Write> writes;
  private final long largestAllocation;
  private final WritePlan placement; // null while sizing
  private final List<DeviceBuffer> arenas;
  private int next; // binding into arenas: the write the next layer makes

  private InferenceActivations(
      List<Write> writes, long largestAllocation, WritePlan placement, List<DeviceBuffer> arenas) {
    this.writes = writes;
    this.largestAllocation = largestAllocation;
    this.placement = placement;
    this.arenas = arenas;
  }

  /**
   * Memory that records the writes layers make and hands out zero-length buffers, for a backend
   * whose largest allocation is {@code largestAllocation} bytes.
   */
  public static InferenceActivations sizing(long largestAllocation) {
    return new InferenceActivations(new ArrayList<>(), largestAllocation, null, List.of());
  }

  /** The arenas for the writes this sizing recorded ({@link #place}), on {@code backend}. */
  public InferenceActivations allocate(Backend backend) {
    WritePlan placed = place(writes, largestAllocation);
    List<DeviceBuffer> made = new ArrayList<>();
    try {
      for (int a = 0; a < placed.arenaBytes().length; a++) {
        made.add(backend.allocate("inference-activations-" + a, DType.U8, placed.arenaBytes()[a]));
      }
    } catch (RuntimeException e) {
      made.forEach(DeviceBuffer::close);
      throw e;
    }
    return new InferenceActivations(List.copyOf(writes), largestAllocation, placed, made);
  }

  /**
   * Each write's place, planned as TFLite's arena planner does ("greedy by size"): a write lives
   * from its layer until the last layer that still reads its value; the largest writes are placed
   * first, each at the lowest aligned offset of the first arena where it overlaps no placed write
   * whose life overlaps its own and stays within {@code largest} bytes.
   */
  private static WritePlan place(List<Write> writes, long largest) {
    int n = writes.size();
    int[] lastRead = new int[n];
    for (int i = 0; i < n; i++) {
      lastRead[i] = i;
      String key = writes.get(i).key();
      for (int j = i + 1; j < n && !writes.get(j).key().equals(key); j++) {
        if (writes.get(j).live().contains(key)) {
          lastRead[i] = j;
        }
      }
    }
    Integer[] order = new Integer[n];
    for (int i = 0; i < n; i++) {
      order[i] = i;
    }
    Arrays.sort(
        order,
        Comparator.comparingLong((Integer i) -> -writes.get(i).bytes()).thenComparing(i -> i));
    int[] arenaOf = new int[n];
    long[] offsets = new long[n];
    List<List<Integer>> arenas = new ArrayList<>();
    for (int i : order) {
      long bytes = writes.get(i).bytes();
      if (bytes > largest) {
        throw new OutOfDeviceMemoryException(
            String.format(
                "%s's activations take %s at this batch, more than the backend's largest"
                    + " allocation (%s); use a smaller --batch-size",
                writes.get(i).layer(), ByteSize.of(bytes), ByteSize.of(largest)));
      }
      int a = 0;
      long at = -1;
      for (; a < arenas.size() && at < 0; a++) {
        at = lowestFit(arenas.get(a), i, bytes, lastRead, offsets, writes);
        at = at + bytes <= largest ? at : -1;
      }
      if (at < 0) {
        arenas.add(new ArrayList<>());
        a = arenas.size();
        at = 0;
      }
      arenaOf[i] = a - 1;
      offsets[i] = at;
      arenas.get(a - 1).add(i);
    }
    long[] arenaBytes = new long[arenas.size()];
    for (int i = 0; i < n; i++) {
      arenaBytes[arenaOf[i]] = Math.max(arenaBytes[arenaOf[i]], offsets[i] + writes.get(i).bytes());
    }
    return new WritePlan(arenaOf, offsets, arenaBytes);
  }

  /** The lowest aligned offset in {@code arena} where write i overlaps no write alive with it. */
  private static long lowestFit(
      List<Integer> arena, int i, long bytes, int[] lastRead, long[] offsets, List<Write> writes) {
    List<Integer> overlapping =
        arena.stream()
            .filter(j -> j <= lastRead[i] && i <= lastRead[j])
            .sorted(Comparator.comparingLong(j -> offsets[j]))
            .toList();
    long at = 0;
    for (int j : overlapping) {
      if (at + bytes <= offsets[j]) {
        break; // fits before this one
      }
      at = Math.max(at, align(offsets[j] + writes.get(j).bytes()));
    }
    return at;
  }

  static long align(long bytes) {
    return (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
  }

  /** The arenas' bytes together (or, sizing, what they will take). */
  public long bytes() {
    return (placement != null ? placement : place(writes, largestAllocation)).bytes();
  }

  /** A layer's first allocation: its write into {@code key}, {@code live} still to be read. */
  int begin(String label, String key, Set<String> live) {
    if (placement == null) {
      writes.add(new Write(label, key, 0, Set.copyOf(live)));
      return writes.size() - 1;
    }
    if (next >= writes.size() || !writes.get(next).key().equals(key)) {
      throw new IllegalStateException(
          label + ": inference activations' write " + next + " into " + key + " was not sized");
    }
    return next++;
  }

  /** {@code count} elements of {@code dtype} at byte {@code at} of write {@code write}. */
  DeviceBuffer take(Backend backend, int write, String label, DType dtype, long at, long count) {
    long end = at + count * dtype.bytes();
    Write w = writes.get(write);
    if (placement == null) {
      writes.set(write, new Write(w.layer(), w.key(), Math.max(w.bytes(), end), w.live()));
      return backend.allocate(label, dtype, 0);
    }
    if (end > w.bytes()) {
      throw new IllegalStateException(
          label
              + ": "
              + end
              + " bytes of inference activations asked for, "
              + w.bytes()
              + " sized (the layers bound differently than when sized)");
    }
    return arenas
        .get(placement.arenaOf()[write])
        .viewAs(dtype, placement.offsets()[write] + at, count);
  }

  @Override
  public void close() {
    arenas.forEach(DeviceBuffer::close);
  }
}
