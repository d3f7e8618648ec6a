package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.ParamGroups;
import java.nio.FloatBuffer;
import java.util.List;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * AdamW on the host over an offloaded model's master weights and gradients; its two moments live in
 * pinned host memory. The arithmetic is {@link AdamWMath}, the CPU backend's, so offloaded and
 * resident training agree bit for bit.
 */
public final class HostAdamW implements HostOptimizer {
  private final AdamWSpec spec;
  private final FloatBuffer params;
  private final FloatBuffer grads;
  private final HostBuffer m;
  private final HostBuffer v;
  private final FloatBuffer fm;
  private final FloatBuffer fv;
  private final HostThreads threads;
  private final ParamGroups groups;
  private int steps;

  /** AdamW over {@code params} with {@code grads} (host slabs of equal length), one group. */
  public HostAdamW(
      Backend backend, HostBuffer params, HostBuffer grads, AdamWSpec spec, HostThreads threads) {
    this(backend, params, grads, spec, ParamGroups.uniform(params.bytes() / 4), threads);
  }

  /** The same, each of {@code groups}' ranges at its learning-rate scale and weight decay. */
  public HostAdamW(
      Backend backend,
      HostBuffer params,
      HostBuffer grads,
      AdamWSpec spec,
      ParamGroups groups,
      HostThreads threads) {
    this.spec = spec;
    this.groups = groups;
    this.params = params.asByteBuffer().asFloatBuffer();
    this.grads = grads.asByteBuffer().asFloatBuffer();
    this.threads = threads;
    this.m = backend.allocateHost(spec.stateSlabs().get(0), params.bytes());
    this.v = backend.allocateHost(spec.stateSlabs().get(1), params.bytes());
    MemoryUtil.setMemory(m.address(), m.bytes(), (byte) 0); // both moments start at zero
    MemoryUtil.setMemory(v.address(), v.bytes(), (byte) 0);
    this.fm = m.asByteBuffer().asFloatBuffer();
    this.fv = v.asByteBuffer().asFloatBuffer();
  }

  @Override
  public HostUpdate beginStep(float lr) {
    steps++;
    int step = steps;
    return (from, to) -> {
      for (ParamGroups.Range r : groups.within(from, to)) {
        AdamWMath math =
            AdamWMath.of(
                lr * r.lrScale(),
                spec.beta1(),
                spec.beta2(),
                spec.eps(),
                r.decay() ? spec.weightDecay() : 0f,
                step);
        int a = Math.toIntExact(r.offset());
        threads.forRange(
            a, a + Math.toIntExact(r.count()), (x, y) -> math.update(params, grads, fm, fv, x, y));
      }
    };
  }

  @Override
  public int steps() {
    return steps;
  }

  @Override
  public void resumeAt(int steps) {
    this.steps = steps;
  }

  @Override
  public List<HostBuffer> state() {
    return List.of(m, v);
  }

  @Override
  public void close() {
    m.close();
    v.close();
  }

  @Override
  public ParamGroups groups() {
    return groups;
  }
}
