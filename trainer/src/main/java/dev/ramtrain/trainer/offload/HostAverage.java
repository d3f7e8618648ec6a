package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.optim.EmaDecay;
import java.nio.FloatBuffer;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * The moving average of an offloaded model's master weights ({@code --ema}), on the host beside
 * them: each layer's range moves toward its masters right after the host updates them, by the
 * device {@code Lerp}'s one fused multiply-add, so an offloaded run keeps a resident run's average
 * bit for bit.
 */
final class HostAverage implements AutoCloseable {
  private final HostBuffer average;
  private final HostBuffer masters;
  private final int n;
  private final EmaDecay decay;
  private long updates; // begun so far
  private float weight; // this update's
  private final HostThreads threads;

  /** An average of {@code masters}, starting as their copy, after {@code updatesDone} updates. */
  HostAverage(
      Backend backend, HostBuffer masters, EmaDecay decay, long updatesDone, HostThreads threads) {
    this.decay = decay;
    this.updates = updatesDone;
    this.threads = threads;
    this.average = backend.allocateHost("masters.ema", masters.bytes());
    this.masters = masters;
    this.n = Math.toIntExact(masters.bytes() / 4);
    MemoryUtil.copyMemory(masters.address(), average.address(), masters.bytes());
  }

  /** Starts an optimizer step's update: its ranges ({@link #update}) move by its weight. */
  void beginUpdate() {
    weight = decay.weightAt(++updates);
  }

  /**
   * Moves elements [from, to) toward the masters: after their update, with the device's {@code
   * Lerp} arithmetic (a weight of 1 copies, as the device average does).
   */
  void update(int from, int to) {
    float w = weight;
    if (w == 1f) {
      MemoryUtil.copyMemory(
          masters.address() + 4L * from, average.address() + 4L * from, 4L * (to - from));
      return;
    }
    threads.forRange(
        from,
        to,
        (a, b) -> { // each range through views of its own: slabs may pass 2 GiB
          FloatBuffer avg = average.floats(a, b - a);
          FloatBuffer m = masters.floats(a, b - a);
          for (int i = 0; i < b - a; i++) {
            float e = avg.get(i);
            avg.put(i, Math.fma(w, m.get(i) - e, e));
          }
        });
  }

  /** The slab the average lives in. */
  HostBuffer slab() {
    return average;
  }

  /** Exchanges the average with the masters (evaluation swaps it in and back). */
  void swapWithMasters() {
    threads.forRange(
        0,
        n,
        (a, b) -> {
          FloatBuffer avg = average.floats(a, b - a);
          FloatBuffer m = masters.floats(a, b - a);
          for (int i = 0; i < b - a; i++) {
            float v = m.get(i);
            m.put(i, avg.get(i));
            avg.put(i, v);
          }
        });
  }

  @Override
  public void close() {
    average.close();
  }
}
