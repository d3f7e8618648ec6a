package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.List;

/** SGD's hyper-parameters (torch.optim.SGD's momentum, weight_decay, nesterov). */
public record SgdSpec(float momentum, float weightDecay, boolean nesterov, ParamGroups.Rules groups)
    implements OptimizerSpec {
  /** Every parameter alike: one group. */
  public SgdSpec(float momentum, float weightDecay, boolean nesterov) {
    this(momentum, weightDecay, nesterov, ParamGroups.Rules.NONE);
  }

  public SgdSpec {
    if (!(momentum >= 0 && weightDecay >= 0)) {
      throw new IllegalArgumentException("SGD needs momentum >= 0 and weight decay >= 0");
    }
    if (nesterov && momentum <= 0) {
      throw new IllegalArgumentException("Nesterov momentum needs momentum > 0");
    }
  }

  @Override
  public List<String> stateSlabs() {
    return List.of("sgd.momentum");
  }

  @Override
  public Optimizer onDevice(Backend backend, Parameters parameters) {
    return new Sgd(backend, parameters.count(), this, ParamGroups.of(groups, parameters.entries()));
  }

  @Override
  public Optimizer onDevice(Backend backend, Parameters parameters, long from, long to) {
    ParamGroups.Layout share = ParamGroups.Layout.whole(parameters.entries()).share(from, to);
    return new Sgd(backend, to - from, this, share.groups(groups));
  }
}
