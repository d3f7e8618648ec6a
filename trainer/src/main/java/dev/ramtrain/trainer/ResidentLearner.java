package dev.ramtrain.trainer;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.optim.Optimizer;
import java.util.Map;

/**
 * Weights, gradients and optimizer state all on the device: backward, gradient clipping and one
 * optimizer kernel over the whole parameter slab. Owns the model and the optimizer.
 */
public final class ResidentLearner implements Learner {
  private final Backend backend;
  private final Model model;
  private final Optimizer optimizer;
  private final float clipNorm;
  private final DeviceBuffer gradNorm;

  /** {@code clipNorm} 0: no clipping. */
  public ResidentLearner(Backend backend, Model model, Optimizer optimizer, float clipNorm) {
    this.backend = backend;
    this.model = model;
    this.optimizer = optimizer;
    this.clipNorm = clipNorm;
    this.gradNorm = backend.allocate("grad-norm", DType.F32, 1);
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
  public void backwardAndUpdate(Stream compute, DeviceBuffer dlogits, int batch, float lr) {
    model.backward(compute, dlogits, batch);
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
    gradNorm.close();
    optimizer.close();
    model.close();
  }
}
