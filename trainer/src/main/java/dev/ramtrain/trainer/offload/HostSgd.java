package dev.ramtrain.trainer.offload;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.SgdMath;
import dev.ramtrain.trainer.optim.SgdSpec;
import java.nio.FloatBuffer;
import java.util.List;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * SGD with momentum on the host over an offloaded model's master weights and gradients; the
 * arithmetic is {@link SgdMath}, the CPU backend's.
 */
public final class HostSgd implements HostOptimizer {
  private final SgdSpec spec;
  private final FloatBuffer params;
  private final FloatBuffer grads;
  private final HostBuffer buffer;
  private final FloatBuffer momentumBuffer;
  private final HostThreads threads;
  private int steps;

  public HostSgd(
      Backend backend, HostBuffer params, HostBuffer grads, SgdSpec spec, HostThreads threads) {
    this.spec = spec;
    this.params = params.asByteBuffer().asFloatBuffer();
    this.grads = grads.asByteBuffer().asFloatBuffer();
    this.threads = threads;
    this.buffer = backend.allocateHost(spec.stateSlabs().get(0), params.bytes());
    MemoryUtil.setMemory(buffer.address(), buffer.bytes(), (byte) 0);
    this.momentumBuffer = buffer.asByteBuffer().asFloatBuffer();
  }

  @Override
  public HostUpdate beginStep(float lr) {
    steps++;
    SgdMath step = new SgdMath(lr, spec.momentum(), spec.weightDecay(), spec.nesterov());
    return (from, to) ->
        threads.forRange(from, to, (a, b) -> step.update(params, grads, momentumBuffer, a, b));
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
}
