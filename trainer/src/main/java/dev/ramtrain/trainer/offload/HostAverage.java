package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.optim.EmaDecay;
import java.nio.FloatBuffer;

/**
 * The moving average of an offloaded model's master weights ({@code --ema}), on the host beside
 * them: each layer's range moves toward its masters right after the host updates them, by the
 * device {@code Lerp}'s one fused multiply-add, so an offloaded run keeps a resident run's average
 * bit for bit.
 */
final class HostAverage implements AutoCloseable {
  private final HostBuffer average;
  private final FloatBuffer avg;
  private final FloatBuffer masters;
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
    this.avg = average.asByteBuffer().asFloatBuffer();
    this.masters = masters.asByteBuffer().asFloatBuffer();
    avg.put(0, masters.asByteBuffer().asFloatBuffer(), 0, this.masters.capacity());
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
      avg.put(from, masters, from, to - from);
      return;
    }
    threads.forRange(
        from,
        to,
        (a, b) -> {
          for (int i = a; i < b; i++) {
            float e = avg.get(i);
            avg.put(i, Math.fma(w, masters.get(i) - e, e));
          }
        });
  }

  /** The slab the average lives in. */
  HostBuffer slab() {
    return average;
  }

  /** The average's values, in model order. */
  float[] values() {
    float[] out = new float[avg.capacity()];
    avg.get(0, out);
    return out;
  }

  void set(float[] values) {
    avg.put(0, values);
  }

  /** Exchanges the average with the masters (evaluation swaps it in and back). */
  void swapWithMasters() {
    threads.forRange(
        0,
        avg.capacity(),
        (a, b) -> {
          for (int i = a; i < b; i++) {
            float m = masters.get(i);
            masters.put(i, avg.get(i));
            avg.put(i, m);
          }
        });
  }

  @Override
  public void close() {
    average.close();
  }
}
