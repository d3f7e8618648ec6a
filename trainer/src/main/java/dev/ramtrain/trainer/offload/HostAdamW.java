package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.AdamWMath;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.ParamGroups;
import java.util.List;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * AdamW on the host over an offloaded model's master weights and gradients; its two moments live in
 * pinned host memory, fp32 or bf16 ({@link OffloadSpec.OptimizerState}). One pass over each range
 * reads gradient, weights and moments and writes weights, moments and the bf16 copies of streamed
 * layers ({@link Bf16Copies}). The arithmetic is {@link AdamWMath}, the CPU backend's, so with fp32
 * moments offloaded and resident training agree bit for bit; bf16 moments are rounded
 * stochastically ({@link StochasticBits}), the rest of the step computed in fp32.
 */
public final class HostAdamW implements HostOptimizer {
  private final AdamWSpec spec;
  private final HostBuffer paramSlab;
  private final HostBuffer gradSlab;
  private final HostBuffer m;
  private final HostBuffer v;
  private final HostThreads threads;
  private final ParamGroups groups;
  private final OffloadSpec.OptimizerState state;
  private final Bf16Copies copies;
  private final long firstElement;
  private final long seed;
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
    this(
        backend,
        params,
        grads,
        spec,
        groups,
        threads,
        OffloadSpec.OptimizerState.FP32,
        Bf16Copies.NONE,
        0,
        0);
  }

  /**
   * The same with moments of {@code state}, writing {@code copies}; {@code firstElement}: the
   * model's index of the slab's element 0 (a ZeRO-1 share's start), so that stochastic rounding
   * draws the same bits for an element whichever rank updates it; {@code seed}: the run's.
   */
  public HostAdamW(
      Backend backend,
      HostBuffer params,
      HostBuffer grads,
      AdamWSpec spec,
      ParamGroups groups,
      HostThreads threads,
      OffloadSpec.OptimizerState state,
      Bf16Copies copies,
      long firstElement,
      long seed) {
    this.spec = spec;
    this.groups = groups;
    this.paramSlab = params;
    this.gradSlab = grads;
    this.threads = threads;
    this.state = state;
    this.copies = copies;
    this.firstElement = firstElement;
    this.seed = seed;
    long stateBytes = params.bytes() / 4 * state.bytesPerValue();
    this.m = backend.allocateHost(spec.stateSlabs().get(0), stateBytes);
    try {
      this.v = backend.allocateHost(spec.stateSlabs().get(1), stateBytes);
    } catch (RuntimeException e) {
      m.close();
      throw e;
    }
    MemoryUtil.setMemory(m.address(), m.bytes(), (byte) 0); // both moments start at zero
    MemoryUtil.setMemory(v.address(), v.bytes(), (byte) 0);
  }

  @Override
  public HostUpdate beginStep(float lr) {
    steps++;
    int step = steps;
    int key = StochasticBits.key(seed, step);
    return (from, to) ->
        copies.forEachRun(
            from,
            to,
            (a, b, copyAt) -> {
              for (ParamGroups.Range r : groups.within(a, b)) {
                AdamWMath math =
                    AdamWMath.of(
                        lr * r.lrScale(),
                        spec.beta1(),
                        spec.beta2(),
                        spec.eps(),
                        r.decay() ? spec.weightDecay() : 0f,
                        step);
                int x = Math.toIntExact(r.offset());
                long copy = copyAt < 0 ? -1 : copyAt + (x - a);
                threads.forRange(
                    x, x + Math.toIntExact(r.count()), (c, d) -> update(math, key, c, d, copy, x));
              }
            });
  }

  /** Elements [from, to) of a range starting at {@code start}, its copies from {@code copy}. */
  private void update(AdamWMath math, int key, int from, int to, long copy, int start) {
    long out = copy < 0 ? 0 : copies.address() + 2 * (copy + (from - start));
    long p = paramSlab.address() + 4L * from;
    long g = gradSlab.address() + 4L * from;
    if (state == OffloadSpec.OptimizerState.BF16) {
      long mAt = m.address() + 2L * from;
      long vAt = v.address() + 2L * from;
      HostAdamWKernel.bf16State(p, g, mAt, vAt, out, to - from, math, key, firstElement + from);
    } else {
      HostAdamWKernel.fp32(
          p, g, m.address() + 4L * from, v.address() + 4L * from, out, to - from, math);
    }
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
  public int stateBytesPerValue() {
    return state.bytesPerValue();
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
