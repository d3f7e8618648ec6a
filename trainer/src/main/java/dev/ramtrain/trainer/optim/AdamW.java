package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.AdamWStep;
import java.util.List;

/**
 * AdamW with decoupled weight decay, as torch.optim.AdamW: one fused, multi-threaded kernel per
 * range of its {@link ParamGroups} (one for the whole slab when every parameter is alike), each at
 * its learning-rate scale, with or without weight decay; frozen parameters are not touched.
 */
public final class AdamW implements Optimizer {
  private final Backend backend;
  private final AdamWSpec spec;
  private final ParamGroups groups;
  private final DeviceBuffer m;
  private final DeviceBuffer v;
  private int steps;

  public AdamW(Backend backend, long parameters, AdamWSpec spec) {
    this(backend, parameters, spec, ParamGroups.uniform(parameters));
  }

  public AdamW(Backend backend, long parameters, AdamWSpec spec, ParamGroups groups) {
    this.backend = backend;
    this.spec = spec;
    this.groups = groups;
    this.m = backend.allocate(spec.stateSlabs().get(0), DType.F32, parameters);
    this.v = backend.allocate(spec.stateSlabs().get(1), DType.F32, parameters);
  }

  @Override
  public void step(Stream stream, DeviceBuffer values, DeviceBuffer grads, float lr) {
    if (values.count() != m.count() || grads.count() != m.count()) {
      throw new IllegalArgumentException(
          "an optimizer of " + m.count() + " parameters stepped over " + values.count());
    }
    steps++;
    for (ParamGroups.Range r : groups.ranges()) {
      backend.run(
          stream,
          new AdamWStep(
              values.view(r.offset(), r.count()),
              grads.view(r.offset(), r.count()),
              m.view(r.offset(), r.count()),
              v.view(r.offset(), r.count()),
              lr * r.lrScale(),
              spec.beta1(),
              spec.beta2(),
              spec.eps(),
              r.decay() ? spec.weightDecay() : 0f,
              steps));
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
  public List<DeviceBuffer> state() {
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
