package dev.ramtrain.trainer;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.GradClipMath;
import dev.ramtrain.trainer.backend.HostBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.dist.GradientExchange;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.optim.Optimizer;
import java.util.ArrayList;
import java.util.List;

/**
 * ZeRO on a resident model: this rank's optimizer holds state for its {@link DataParallel#share} of
 * the parameters only, and each step updates that share on the device and gathers the others'. The
 * gradient exchange leaves the share's mean on the host ({@link GradientExchange#reduced}), where
 * it is clipped with the offloaded learner's arithmetic (the shares' sums of squares summed over
 * the ranks), goes to the share of the device's gradient slab, and the share's update runs there;
 * the updated share comes back to the same host slab, the ring gathers every rank's, and the whole
 * slab goes to the device. AdamW and SGD are element-wise, so without clipping the weights are the
 * unpartitioned run's bit for bit; with it, ZeRO-1's and ZeRO-2's and the offloaded ZeRO run's.
 * Holds no native memory of its own: the host slab is the exchange's.
 */
final class ResidentShare {
  private final Backend backend;
  private final DataParallel ranks;
  private final long n;
  private final long from;
  private final long to;
  private final long[] pieces; // the host slab in parts one Java buffer views, for the ring

  ResidentShare(Backend backend, DataParallel ranks, long parameters) {
    this.backend = backend;
    this.ranks = ranks;
    if (ranks.devicesPerNode() > 1) { // a node's devices would each update the node's share
      throw new IllegalArgumentException(
          "ramtrain.dist.zero: resident ZeRO with "
              + ranks.devicesPerNode()
              + " devices a node is not built (ZeRO partitions the nodes' host copies, offloaded)");
    }
    if (parameters > Safetensors.MAX_ARRAY) { // a checkpoint gathers a state slab in one array
      throw new IllegalArgumentException(
          "ramtrain.dist.zero: a resident model of "
              + parameters
              + " parameters has state slabs larger than one Java array holds (at most "
              + Safetensors.MAX_ARRAY
              + "); train it offloaded (--offload on), whose checkpoints read the host slabs");
    }
    this.n = parameters;
    this.pieces = DataParallel.pieces(parameters, HostBuffer.FLOATS_PER_COPY);
    long[] share = ranks.share(parameters);
    this.from = share[0];
    this.to = share[1];
  }

  /**
   * After the exchange's {@link GradientExchange#finish}: clips the share's mean gradient to {@code
   * clipNorm} (0: none), updates the share with {@code optimizer} at {@code lr}, and gathers every
   * rank's updated share into {@code p}'s values.
   */
  void update(
      Stream compute,
      Parameters p,
      Optimizer optimizer,
      GradientExchange exchange,
      float clipNorm,
      float lr) {
    HostBuffer host = exchange.reduced();
    int count = Math.toIntExact(to - from);
    long at = 4 * from;
    if (clipNorm > 0) { // as the offloaded ZeRO step clips its share: the ranks' sums summed
      GradClipMath.clip(
          (a, length) -> host.floats(from + a, length),
          count,
          optimizer.groups().frozen(count),
          clipNorm,
          share -> ranks.sum(share)[0],
          GradClipMath.SERIAL);
    }
    DeviceBuffer values = p.values().view(from, count);
    DeviceBuffer grads = p.grads().view(from, count);
    backend.copy(host, at, grads, 4L * count, compute);
    optimizer.step(compute, values, grads, lr);
    backend.copy(values, host, at, 4L * count, compute);
    compute.synchronize(); // the share's weights on the host, and the gradients' upload read
    ranks.allGather(host, pieces);
    backend.copy(host, 0, p.values(), 4 * n, compute);
  }

  /**
   * The optimizer's state slabs as a checkpoint stores them, whole: every rank's share gathered
   * (every rank takes part, as in every collective) through the exchange's host slab, free between
   * steps, so the heap holds only what the checkpoint keeps.
   */
  List<float[]> wholeState(Optimizer optimizer, GradientExchange exchange, Stream compute) {
    HostBuffer host = exchange.reduced();
    compute.synchronize(); // the last update's upload has read the slab
    List<float[]> slabs = new ArrayList<>();
    for (DeviceBuffer slab : optimizer.state()) {
      backend.copy(slab, host, 4 * from, slab.bytes(), compute);
      compute.synchronize();
      ranks.allGather(host, pieces);
      float[] values = new float[(int) n];
      host.getFloats(0, values, 0, values.length);
      slabs.add(values);
    }
    return slabs;
  }

  /** Restores the share's part of {@code c}'s whole optimizer state and its step count. */
  void restoreState(Checkpoints.Loaded c, Optimizer optimizer, Stream compute) {
    List<DeviceBuffer> slabs = optimizer.state();
    Checkpoints.requireOptimizerSlabs(c, slabs.size());
    for (int i = 0; i < slabs.size(); i++) {
      Safetensors.Values values = c.optimizerState().get(i);
      if (values.count() != n) {
        throw new IllegalArgumentException(
            c.dir() + ": optimizer state slab " + i + " has " + values.count() + " values");
      }
      // a checkpoint holds the whole state: under ZeRO this rank keeps its share, read from the
      // file a piece at a time
      Checkpoints.upload(backend, compute, slabs.get(i), values, from);
    }
    optimizer.resumeAt(c.optimizerSteps());
  }
}
