package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.List;

/**
 * Updates a parameter slab from its gradient slab, in one kernel call per range: a model's whole
 * slab, or a rank's share of it (ZeRO, {@link OptimizerSpec#onDevice(Backend, Parameters, long,
 * long)}).
 */
public interface Optimizer extends AutoCloseable {
  /** Applies one update with learning rate {@code lr}; the first step is step 1. */
  default void step(Stream stream, Parameters parameters, float lr) {
    step(stream, parameters.values(), parameters.grads(), lr);
  }

  /**
   * As above, over {@code values} and {@code grads}: the slab this optimizer was built for (its
   * state's length), a view of the share for a rank's share.
   */
  void step(Stream stream, DeviceBuffer values, DeviceBuffer grads, float lr);

  /** Steps taken so far. */
  int steps();

  /** Continues a resumed run: the next step is {@code steps + 1}. */
  void resumeAt(int steps);

  /** The ranges it updates: what is not in them is frozen. */
  ParamGroups groups();

  /** The state slabs (momentum; or AdamW's m and v), in a fixed order, for checkpoints. */
  List<DeviceBuffer> state();

  @Override
  void close();
}
