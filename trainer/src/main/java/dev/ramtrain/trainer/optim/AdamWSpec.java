package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.List;

/** AdamW's hyper-parameters (torch.optim.AdamW's betas, eps, weight_decay). */
public record AdamWSpec(
    float beta1, float beta2, float eps, float weightDecay, ParamGroups.Rules groups)
    implements OptimizerSpec {
  /** Every parameter alike: one group. */
  public AdamWSpec(float beta1, float beta2, float eps, float weightDecay) {
    this(beta1, beta2, eps, weightDecay, ParamGroups.Rules.NONE);
  }

  public AdamWSpec {
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps > 0 && weightDecay >= 0)) {
      throw new IllegalArgumentException(
          "AdamW needs 0 <= beta < 1, eps > 0 and weight decay >= 0");
    }
  }

  @Override
  public List<String> stateSlabs() {
    return List.of("adamw.m", "adamw.v");
  }

  @Override
  public Optimizer onDevice(Backend backend, Parameters parameters) {
    return new AdamW(
        backend, parameters.count(), this, ParamGroups.of(groups, parameters.entries()));
  }

  @Override
  public Optimizer onDevice(Backend backend, Parameters parameters, long from, long to) {
    ParamGroups.Layout share = ParamGroups.Layout.whole(parameters.entries()).share(from, to);
    return new AdamW(backend, to - from, this, share.groups(groups));
  }
}
