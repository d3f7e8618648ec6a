package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.AdamWStep;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.List;

/** AdamW with decoupled weight decay, as torch.optim.AdamW; one fused, multi-threaded kernel. */
public final class AdamW implements Optimizer {
  private final Backend backend;
  private final AdamWSpec spec;
  private final DeviceBuffer m;
  private final DeviceBuffer v;
  private int steps;

  public AdamW(Backend backend, long parameters, AdamWSpec spec) {
    this.backend = backend;
    this.spec = spec;
    this.m = backend.allocate(spec.stateSlabs().get(0), DType.F32, parameters);
    this.v = backend.allocate(spec.stateSlabs().get(1), DType.F32, parameters);
  }

  @Override
  public void step(Stream stream, Parameters p, float lr) {
    steps++;
    backend.run(
        stream,
        new AdamWStep(
            p.values(),
            p.grads(),
            m,
            v,
            lr,
            spec.beta1(),
            spec.beta2(),
            spec.eps(),
            spec.weightDecay(),
            steps));
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
  public List<DeviceBuffer> state() {
    return List.of(m, v);
  }

  @Override
  public void close() {
    m.close();
    v.close();
  }
}
