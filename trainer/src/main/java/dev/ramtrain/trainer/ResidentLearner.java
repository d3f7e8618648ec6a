package dev.ramtrain.trainer;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.Add;
import dev.ramtrain.trainer.backend.ops.ClipGradNorm;
import dev.ramtrain.trainer.backend.ops.Fill;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.dist.GradientExchange;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.Parameters;
import dev.ramtrain.trainer.optim.EmaDecay;
import dev.ramtrain.trainer.optim.MovingAverage;
import dev.ramtrain.trainer.optim.Optimizer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Weights, gradients and optimizer state all on the device: backward, gradient clipping and one
 * optimizer kernel over the whole parameter slab. Owns the model and the optimizer.
 *
 * <p>Data parallel, each layer's gradients go to pinned host memory as soon as its backward has
 * run, are averaged over the ranks there while the earlier layers' backward goes on, and come back
 * before clipping ({@link GradientExchange}), so every rank clips and updates the same gradient.
 *
 * <p>Gradient accumulation sums whole micro-batch gradients: each micro-batch's backward runs into
 * zeroed gradients and its result is added to the step's total, as ranks add theirs. So one process
 * accumulating N micro-batches computes what N ranks with those batches compute (for two, bit for
 * bit: the ring adds g0 + g1 as the total does), at the cost of a second gradient slab while
 * accumulating.
 *
 * <p>Under ZeRO ({@code ramtrain.dist.zero}) the device keeps optimizer state for this rank's share
 * of the parameters only: the gradients are reduced to their owners instead of averaged back
 * (ZeRO-2 bucket by bucket during backward, ZeRO-1 after it), and {@link ResidentShare} clips,
 * updates the share and gathers the ranks' updated shares.
 */
public final class ResidentLearner implements Learner {
  private final Backend backend;
  private final Model model;
  private final Optimizer optimizer;
  private final float clipNorm;
  private final DeviceBuffer gradNorm;
  private final DataParallel ranks;
  private final GradientExchange exchange; // null: one rank
  private final ResidentShare share; // ZeRO: the optimizer is this rank's share's; else null
  private DeviceBuffer stepTotal; // the step's finished micro-batches' gradients (accumulating)
  private boolean holdsTotal; // whether this step has finished micro-batches in stepTotal
  private MovingAverage average; // null: no --ema

  /** {@code clipNorm} 0: no clipping. */
  public ResidentLearner(Backend backend, Model model, Optimizer optimizer, float clipNorm) {
    this(backend, model, optimizer, clipNorm, DataParallel.single());
  }

  /**
   * One rank of {@code ranks} (which the caller closes); {@code clipNorm} 0: no clipping. Where
   * {@code ranks} partition the optimizer state (ZeRO), {@code optimizer} is this rank's share's
   * ({@link dev.ramtrain.trainer.optim.OptimizerSpec#onDevice(Backend, Parameters, long, long)}).
   */
  public ResidentLearner(
      Backend backend, Model model, Optimizer optimizer, float clipNorm, DataParallel ranks) {
    this.backend = backend;
    this.model = model;
    this.optimizer = optimizer;
    this.clipNorm = clipNorm;
    this.ranks = ranks;
    this.share = // first: it refuses a model it cannot gather before anything is allocated
        ranks.partitionsOptimizerState()
            ? new ResidentShare(backend, ranks, model.parameters().count())
            : null;
    this.gradNorm = backend.allocate("grad-norm", DType.F32, 1);
    this.exchange = ranks.worldSize() == 1 ? null : new GradientExchange(backend, model, ranks);
  }

  @Override
  public Model network() {
    return model;
  }

  @Override
  public long parameterCount() {
    return model.parameters().count();
  }

  @Override
  public void beginStep(Stream compute, long step) {
    model.zeroGrad(compute);
    model.beginStep(step);
    holdsTotal = false;
  }

  @Override
  public void continueStep(Stream compute, long dropoutSeed) {
    model.beginStep(dropoutSeed);
  }

  @Override
  public void accumulate(Stream compute, DeviceBuffer dlogits, int batch) {
    model.backward(compute, dlogits, batch); // into the gradients zeroed before
    DeviceBuffer grads = model.parameters().grads();
    if (stepTotal == null) {
      stepTotal = backend.allocate("gradients.step-total", DType.F32, grads.count());
    }
    if (holdsTotal) {
      backend.run(compute, new Add(stepTotal, grads, stepTotal));
    } else {
      backend.copy(grads, stepTotal, compute);
      holdsTotal = true;
    }
    model.zeroGrad(compute);
  }

  @Override
  public void backwardAndUpdate(Stream compute, DeviceBuffer dlogits, int batch, float lr) {
    if (holdsTotal) { // the last micro-batch of an accumulated step: its gradient joins the total
      model.backward(compute, dlogits, batch);
      backend.run(
          compute, new Add(stepTotal, model.parameters().grads(), model.parameters().grads()));
      if (exchange != null) {
        for (int layer = model.layers().size() - 1; layer >= 0; layer--) {
          exchange.layerDone(compute, layer);
        }
        exchange.finish(compute);
      }
    } else if (exchange == null) {
      model.backward(compute, dlogits, batch);
    } else {
      model.backward(compute, dlogits, batch, layer -> exchange.layerDone(compute, layer));
      exchange.finish(compute);
    }
    if (share != null) {
      share.update(compute, model.parameters(), optimizer, exchange, clipNorm, lr);
      if (average != null) {
        average.update(compute);
      }
      return;
    }
    if (clipNorm > 0) {
      DeviceBuffer grads = model.parameters().grads();
      // Frozen parameters have no gradient in timm's clipping (none is computed): out of the norm.
      for (long[] frozen : optimizer.groups().frozen(grads.count())) {
        backend.run(compute, new Fill(grads.view(frozen[0], frozen[1]), 0f));
      }
      backend.run(compute, new ClipGradNorm(grads, clipNorm, gradNorm));
    }
    optimizer.step(compute, model.parameters(), lr);
    if (average != null) {
      average.update(compute);
    }
  }

  @Override
  public void averageWeights(EmaDecay decay, Checkpoints.Loaded resumed, Stream compute) {
    Parameters p = model.parameters();
    long done = resumed == null ? 0 : resumed.optimizerSteps();
    average = new MovingAverage(backend, decay, done, List.of(p.values(), p.buffers()), compute);
    if (resumed != null && !resumed.averaged().isEmpty()) {
      Checkpoints.Loaded avg = resumed.averagedAsWeights();
      List<Parameters.Entry> all = new ArrayList<>(p.entries());
      all.addAll(p.bufferEntries());
      Checkpoints.requireTensors(avg, all);
      List<DeviceBuffer> slabs = average.averages();
      Checkpoints.upload(
          backend, compute, slabs.get(0), Checkpoints.gather(avg, p.entries(), p.values().count()));
      Checkpoints.upload(
          backend,
          compute,
          slabs.get(1),
          Checkpoints.gather(avg, p.bufferEntries(), p.buffers().count()));
    }
  }

  @Override
  public boolean averaging() {
    return average != null;
  }

  /** The gradients hold the weights meanwhile: evaluation computes none. */
  @Override
  public <T> T withAveragedWeights(Stream compute, Supplier<T> body) {
    Parameters p = model.parameters();
    try (DeviceBuffer spareBuffers =
        backend.allocate("buffers.spare", DType.F32, p.buffers().count())) {
      try {
        return average.swappedIn(compute, List.of(p.grads(), spareBuffers), body);
      } finally {
        compute.synchronize(); // the copies back read the spare buffer, closed next
      }
    }
  }

  @Override
  public Map<String, Object> stepMetrics(Stream compute) {
    compute.synchronize();
    return Map.of();
  }

  @Override
  public DeviceBuffer buffers() {
    return model.parameters().buffers();
  }

  @Override
  public Checkpoints.Snapshot snapshot(Stream compute) {
    Checkpoints.Snapshot snapshot;
    if (share == null) {
      snapshot = Checkpoints.snapshot(model, optimizer, backend, compute);
    } else {
      snapshot =
          Checkpoints.snapshot(model, null, backend, compute)
              .withOptimizerState(
                  share.wholeState(optimizer, exchange, compute), optimizer.steps());
    }
    if (average == null) {
      return snapshot;
    }
    Parameters p = model.parameters();
    List<Safetensors.Tensor> averaged = new ArrayList<>();
    List<DeviceBuffer> slabs = average.averages();
    averaged.addAll(
        Checkpoints.tensors(p.entries(), Checkpoints.download(backend, compute, slabs.get(0))));
    averaged.addAll(
        Checkpoints.tensors(
            p.bufferEntries(), Checkpoints.download(backend, compute, slabs.get(1))));
    return snapshot.withAveraged(averaged);
  }

  @Override
  public void restore(Checkpoints.Loaded checkpoint, Stream compute) {
    if (share == null) {
      Checkpoints.restore(checkpoint, model, optimizer, backend, compute);
    } else {
      Checkpoints.restore(checkpoint, model, null, backend, compute);
      share.restoreState(checkpoint, optimizer, compute);
    }
  }

  @Override
  public void close() {
    try (model;
        optimizer;
        MovingAverage closedAverage = average;
        gradNorm;
        DeviceBuffer closedTotal = stepTotal;
        GradientExchange closedExchange = exchange) {
      // closes in reverse order
    }
  }
}
