package dev.ramtrain.trainer;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.dist.GradientExchange;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.optim.Optimizer;
import java.util.Map;

/**
 * Weights, gradients and optimizer state all on the device: backward, gradient clipping and one
 * optimizer kernel over the whole parameter slab. Owns the model and the optimizer.
 *
 * <p>Data parallel, each layer's gradients go to pinned host memory as soon as its backward has
 * run, are averaged over the ranks there while the earlier layers' backward goes on, and come back
 * before clipping ({@link GradientExchange}), so every rank clips and updates the same gradient.
 */
public final class ResidentLearner implements Learner {
  private final Backend backend;
  private final Model model;
  private final Optimizer optimizer;
  private final float clipNorm;
  private final DeviceBuffer gradNorm;
  private final DataParallel ranks;
  private final GradientExchange exchange; // null: one rank

  /** {@code clipNorm} 0: no clipping. */
  public ResidentLearner(Backend backend, Model model, Optimizer optimizer, float clipNorm) {
    this(backend, model, optimizer, clipNorm, DataParallel.single());
  }

  /** One rank of {@code ranks} (which the caller closes); {@code clipNorm} 0: no clipping. */
  public ResidentLearner(
      Backend backend, Model model, Optimizer optimizer, float clipNorm, DataParallel ranks) {
    this.backend = backend;
    this.model = model;
    this.optimizer = optimizer;
    this.clipNorm = clipNorm;
    this.ranks = ranks;
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
  }

  @Override
  public void continueStep(Stream compute, long dropoutSeed) {
    model.beginStep(dropoutSeed);
  }

  @Override
  public void accumulate(Stream compute, DeviceBuffer dlogits, int batch) {
    model.backward(compute, dlogits, batch); // backward adds to the gradients zeroed at beginStep
  }

  @Override
  public void backwardAndUpdate(Stream compute, DeviceBuffer dlogits, int batch, float lr) {
    if (exchange == null) {
      model.backward(compute, dlogits, batch);
    } else {
      model.backward(compute, dlogits, batch, layer -> exchange.layerDone(compute, layer));
      exchange.finish(compute);
    }
    if (clipNorm > 0) {
      backend.clipGradNorm(compute, model.parameters().grads(), clipNorm, gradNorm);
    }
    optimizer.step(compute, model.parameters(), lr);
  }

  @Override
  public Map<String, Object> stepMetrics(Stream compute) {
    compute.synchronize();
    return Map.of();
  }

  @Override
  public Checkpoints.Snapshot snapshot(Stream compute) {
    return Checkpoints.snapshot(model, optimizer, backend, compute);
  }

  @Override
  public void restore(Checkpoints.Loaded checkpoint, Stream compute) {
    Checkpoints.restore(checkpoint, model, optimizer, backend, compute);
  }

  @Override
  public void close() {
    try (model;
        optimizer;
        gradNorm;
        GradientExchange closedExchange = exchange) {
      // closes in reverse order
    }
  }
}
