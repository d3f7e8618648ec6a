package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.SgdMath;
import dev.ramtrain.trainer.optim.ParamGroups;
import dev.ramtrain.trainer.optim.SgdSpec;
import java.util.List;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * SGD with momentum on the host over an offloaded model's master weights and gradients; the
 * arithmetic is {@link SgdMath}, the CPU backend's.
 */
public final class HostSgd implements HostOptimizer {
  private final SgdSpec spec;
  private final HostBuffer params;
  private final HostBuffer grads;
  private final HostBuffer buffer; // the momentum
  private final HostThreads threads;
  private final ParamGroups groups;
  private int steps;

  public HostSgd(
      Backend backend, HostBuffer params, HostBuffer grads, SgdSpec spec, HostThreads threads) {
    this(backend, params, grads, spec, ParamGroups.uniform(params.bytes() / 4), threads);
  }

  /** The same, each of {@code groups}' ranges at its learning-rate scale and weight decay. */
  public HostSgd(
      Backend backend,
      HostBuffer params,
      HostBuffer grads,
      SgdSpec spec,
      ParamGroups groups,
      HostThreads threads) {
    this.spec = spec;
    this.groups = groups;
    this.params = params;
    this.grads = grads;
    this.threads = threads;
    this.buffer = backend.allocateHost(spec.stateSlabs().get(0), params.bytes());
    MemoryUtil.setMemory(buffer.address(), buffer.bytes(), (byte) 0);
  }

  @Override
  public HostUpdate beginStep(float lr) {
    steps++;
    return (from, to) -> {
      for (ParamGroups.Range r : groups.within(from, to)) {
        SgdMath math =
            new SgdMath(
                lr * r.lrScale(),
                spec.momentum(),
                r.decay() ? spec.weightDecay() : 0f,
                spec.nesterov());
        int a = Math.toIntExact(r.offset());
        threads.forRange(
            a,
            a + Math.toIntExact(r.count()),
            (x, y) -> // each range through views of its own: slabs may pass 2 GiB
            math.update(
                    params.floats(x, y - x),
                    grads.floats(x, y - x),
                    buffer.floats(x, y - x),
                    0,
                    y - x));
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
    return List.of(buffer);
  }

  @Override
  public void close() {
    buffer.close();
  }

  @Override
  public ParamGroups groups() {
    return groups;
  }
}
