package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.SgdStep;
import java.util.List;

/**
 * SGD with momentum, optional Nesterov, and L2 weight decay, as torch.optim.SGD; one kernel per
 * range of its {@link ParamGroups}, as {@link AdamW}.
 */
public final class Sgd implements Optimizer {
  private final Backend backend;
  private final SgdSpec spec;
  private final ParamGroups groups;
  private final DeviceBuffer buffer;
  private int steps;

  public Sgd(Backend backend, long parameters, SgdSpec spec) {
    this(backend, parameters, spec, ParamGroups.uniform(parameters));
  }

  public Sgd(Backend backend, long parameters, SgdSpec spec, ParamGroups groups) {
    this.backend = backend;
    this.spec = spec;
    this.groups = groups;
    this.buffer = backend.allocate(spec.stateSlabs().get(0), DType.F32, parameters);
  }

  @Override
  public void step(Stream stream, DeviceBuffer values, DeviceBuffer grads, float lr) {
    if (values.count() != buffer.count() || grads.count() != buffer.count()) {
      throw new IllegalArgumentException(
          "an optimizer of " + buffer.count() + " parameters stepped over " + values.count());
    }
    for (ParamGroups.Range r : groups.ranges()) {
      backend.run(
          stream,
          new SgdStep(
              values.view(r.offset(), r.count()),
              grads.view(r.offset(), r.count()),
              buffer.view(r.offset(), r.count()),
              lr * r.lrScale(),
              spec.momentum(),
              r.decay() ? spec.weightDecay() : 0f,
              spec.nesterov()));
    }
    steps++;
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
