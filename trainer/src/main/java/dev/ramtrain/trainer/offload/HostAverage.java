package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.optim.MovingAverage;
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
  private final float weight;
  private final HostThreads threads;

  /** An average of {@code masters}, starting as their copy. */
  HostAverage(Backend backend, HostBuffer masters, float decay, HostThreads threads) {
    this.weight = MovingAverage.weightOf(decay);
    this.threads = threads;
    this.average = backend.allocateHost("masters.ema", masters.bytes());
    this.avg = average.asByteBuffer().asFloatBuffer();
    this.masters = masters.asByteBuffer().asFloatBuffer();
    avg.put(0, masters.asByteBuffer().asFloatBuffer(), 0, this.masters.capacity());
  }

  /** Moves elements [from, to) toward the masters: after their update. */
  void update(int from, int to) {
    threads.forRange(
        from,
        to,
        (a, b) -> {
          for (int i = a; i < b; i++) {
            float e = avg.get(i);
            avg.put(i, Math.fma(weight, masters.get(i) - e, e));
          }
        });
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
