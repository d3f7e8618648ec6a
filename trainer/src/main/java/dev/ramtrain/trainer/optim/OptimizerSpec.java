package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.nn.Parameters;
import java.io.Serializable;
import java.util.List;

/**
 * What optimizer a run uses and with which hyper-parameters, checked once. The same description
 * builds the device optimizer ({@link #onDevice}) and the host one of an offloaded run ({@code
 * HostOptimizer.create}), and names their state slabs in the order checkpoints store them, so a
 * checkpoint of either kind resumes in the other.
 */
public sealed interface OptimizerSpec extends Serializable permits AdamWSpec, SgdSpec {
  /** The state slabs, one value per parameter each, in checkpoint order. */
  List<String> stateSlabs();

  /** How parameters are grouped (learning-rate scales, weight decay, frozen ones). */
  ParamGroups.Rules groups();

  /** The optimizer over a model's resident slab, its state on the device. */
  Optimizer onDevice(Backend backend, Parameters parameters);

  /**
   * The optimizer of a rank's share [{@code from}, {@code to}) of a resident slab (ZeRO): state for
   * the share only, its groups numbered from the share's first element; it steps over the share's
   * views.
   */
  Optimizer onDevice(Backend backend, Parameters parameters, long from, long to);
}
