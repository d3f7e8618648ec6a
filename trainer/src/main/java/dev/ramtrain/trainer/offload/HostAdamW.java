package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import java.nio.FloatBuffer;
import java.util.concurrent.ForkJoinPool;
import java.util.stream.IntStream;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * AdamW on the host, over the pinned master weights and gradients of an offloaded model: its two
 * moments live in pinned host memory, allocated once, and the step is split across host threads.
 * The arithmetic is {@link AdamWMath}, the CPU backend's, so offloaded and resident training agree
 * bit for bit.
 */
public final class HostAdamW implements AutoCloseable {
  private static final int CHUNK = 1 << 16;

  private final float beta1;
  private final float beta2;
  private final float eps;
  private final float weightDecay;
  private final HostBuffer m;
  private final HostBuffer v;
  private final ForkJoinPool pool;
  private int steps;

  public HostAdamW(
      Backend backend,
      long parameters,
      float beta1,
      float beta2,
      float eps,
      float weightDecay,
      int threads) {
    this.beta1 = beta1;
    this.beta2 = beta2;
    this.eps = eps;
    this.weightDecay = weightDecay;
    this.m = backend.allocateHost("adamw.m", 4 * parameters);
    this.v = backend.allocateHost("adamw.v", 4 * parameters);
    this.pool = new ForkJoinPool(threads);
    MemoryUtil.setMemory(m.address(), m.bytes(), (byte) 0); // both moments start at zero
    MemoryUtil.setMemory(v.address(), v.bytes(), (byte) 0);
  }

  /** One step over {@code params} with {@code grads} (host slabs of the same length). */
  public void step(HostBuffer params, HostBuffer grads, float lr) {
    steps++;
    AdamWMath math = AdamWMath.of(lr, beta1, beta2, eps, weightDecay, steps);
    FloatBuffer p = params.asByteBuffer().asFloatBuffer();
    FloatBuffer g = grads.asByteBuffer().asFloatBuffer();
    FloatBuffer fm = m.asByteBuffer().asFloatBuffer();
    FloatBuffer fv = v.asByteBuffer().asFloatBuffer();
    int n = p.capacity();
    int chunks = (n + CHUNK - 1) / CHUNK;
    pool.submit(
            () ->
                IntStream.range(0, chunks)
                    .parallel()
                    .forEach(
                        c -> math.update(p, g, fm, fv, c * CHUNK, Math.min(n, (c + 1) * CHUNK))))
        .join();
  }

  public int steps() {
    return steps;
  }

  @Override
  public void close() {
    pool.shutdown();
    m.close();
    v.close();
  }
}
