package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.GradClipMath;
import dev.ramtrain.trainer.backend.HostBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Future;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * A clipped step's host update run speculatively (SuperOffload's speculation, then validation):
 * each layer's range is updated unclipped as soon as its gradient lands, as an unclipped step's is,
 * after a copy of what the update will change (masters, optimizer state, the weights' average) is
 * kept, and the norm's chunks ({@link GradClipMath}'s, the serial update's) are summed on the host
 * threads as they fill. After backward the norm decides: finite and within the bound, the step
 * stands, and it is the serial update's bit for bit (which scales by 1); otherwise the kept copy
 * goes back and the step runs again over the whole slab on the clipped gradients, as the serial
 * update runs it. Clipping is rare after warm-up, so the update leaves the critical path for one
 * more copy of the written state in host memory.
 */
final class SpeculativeClip implements AutoCloseable {
  private final Backend backend;
  private final HostBuffer grads;
  private final int n;
  private final HostThreads threads;
  private final List<long[]> frozen; // [from, count): out of the norm, their gradients zeroed
  private final List<HostBuffer> written = new ArrayList<>();
  private final List<HostBuffer> kept = new ArrayList<>();
  private final List<Integer> widths = new ArrayList<>(); // bytes an element, per kept slab
  private final int chunkSize;
  private final int[] waiting; // per chunk: elements not landed yet this step
  private final double[] sums;
  private final List<Future<?>> summing = new ArrayList<>();

  /**
   * Speculation over {@code grads} (n floats) for an update writing {@code written}, each a slab of
   * n elements (fp32, or bf16 moments) in the gradients' order; {@code frozen}: ranges without
   * gradients in the norm.
   */
  SpeculativeClip(
      Backend backend,
      HostBuffer grads,
      List<HostBuffer> written,
      List<long[]> frozen,
      HostThreads threads) {
    this.backend = backend;
    this.grads = grads;
    this.n = Math.toIntExact(grads.bytes() / 4);
    this.threads = threads;
    this.frozen = List.copyOf(frozen);
    int chunks = GradClipMath.chunks(n);
    this.chunkSize = (n + chunks - 1) / chunks;
    this.waiting = new int[chunks];
    this.sums = new double[chunks];
    try {
      for (HostBuffer slab : written) {
        alsoKeep(slab);
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /**
   * Keeps {@code slab} (n elements the step writes) too: the weights' average, once there is one.
   */
  void alsoKeep(HostBuffer slab) {
    if (slab.bytes() != 4L * n && slab.bytes() != 2L * n) {
      throw new IllegalArgumentException(
          slab.bytes() + " bytes kept beside " + n + " gradients: neither fp32 nor bf16 of each");
    }
    HostBuffer copy = backend.allocateHost("speculative-clip.kept", slab.bytes());
    kept.add(copy);
    written.add(slab);
    widths.add((int) (slab.bytes() / n));
  }

  /** Host memory one more kept slab of {@code parameters} floats takes. */
  static long bytesPerSlab(long parameters) {
    return 4 * parameters;
  }

  /** Starts a step: every chunk waits for its elements again. */
  void beginStep() {
    for (int c = 0; c < waiting.length; c++) {
      waiting[c] = Math.min(n, (c + 1) * chunkSize) - c * chunkSize;
    }
    Arrays.fill(sums, 0);
    summing.clear();
  }

  /**
   * Gradients [from, to) have landed (averaged over the ranks): the frozen ones among them are
   * zeroed, the chunks they complete are summed on the host threads, and what the update of [from,
   * to) will change is kept. Runs on the host optimizer thread, before that update.
   */
  void landed(int from, int to) {
    for (long[] f : frozen) {
      long a = Math.max(from, f[0]);
      long b = Math.min(to, f[0] + f[1]);
      if (a < b) { // zero, as the serial clip does: a NaN times 0 would stay NaN
        MemoryUtil.setMemory(grads.address() + 4 * a, 4 * (b - a), (byte) 0);
      }
    }
    for (int c = from / chunkSize; c < waiting.length && c * chunkSize < to; c++) {
      int start = Math.max(from, c * chunkSize);
      int end = Math.min(to, (c + 1) * chunkSize);
      waiting[c] -= end - start;
      if (waiting[c] == 0) {
        int chunk = c;
        summing.add(
            threads.submit(
                () -> sums[chunk] = GradClipMath.chunkSumOfSquares(grads::floats, chunk, n)));
      }
    }
    for (int k = 0; k < written.size(); k++) {
      copyElements(written.get(k), kept.get(k), widths.get(k), from, to);
    }
  }

  /** The step's gradient norm, once every range has landed and been updated. */
  float norm() {
    for (int c = 0; c < waiting.length; c++) {
      if (waiting[c] != 0) {
        throw new IllegalStateException(
            "chunk " + c + " of the gradient norm is missing " + waiting[c] + " elements");
      }
    }
    for (Future<?> f : summing) {
      HostThreads.join(f);
    }
    return GradClipMath.norm(sums);
  }

  /** Puts back everything the step's speculative updates changed. */
  void restore() {
    for (int k = 0; k < written.size(); k++) {
      copyElements(kept.get(k), written.get(k), widths.get(k), 0, n);
    }
  }

  /** Elements [from, to) of {@code source} into {@code target}, {@code width} bytes each. */
  private void copyElements(HostBuffer source, HostBuffer target, int width, int from, int to) {
    threads.forRange(
        from,
        to,
        (a, b) ->
            MemoryUtil.copyMemory(
                source.address() + (long) a * width,
                target.address() + (long) a * width,
                (long) (b - a) * width));
  }

  /** The gradients, for scaling them before the step runs again. */
  HostBuffer gradients() {
    return grads;
  }

  @Override
  public void close() {
    kept.forEach(HostBuffer::close);
    kept.clear();
  }
}
