package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
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

  /** The optimizer over a resident slab of {@code parameters} values, its state on the device. */
  Optimizer onDevice(Backend backend, long parameters);
}
