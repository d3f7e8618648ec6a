package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.List;

/** SGD with momentum, optional Nesterov, and L2 weight decay, as torch.optim.SGD. */
public final class Sgd implements Optimizer {
  private final Backend backend;
  private final float momentum;
  private final float weightDecay;
  private final boolean nesterov;
  private final DeviceBuffer buffer;
  private int steps;

  public Sgd(
      Backend backend, long parameters, float momentum, float weightDecay, boolean nesterov) {
    if (nesterov && momentum <= 0) {
      throw new IllegalArgumentException("Nesterov momentum needs momentum > 0");
    }
    this.backend = backend;
    this.momentum = momentum;
    this.weightDecay = weightDecay;
    this.nesterov = nesterov;
    this.buffer = backend.allocate("sgd.momentum", DType.F32, parameters);
  }

  @Override
  public void step(Stream stream, Parameters p, float lr) {
    backend.sgdStep(stream, p.values(), p.grads(), buffer, lr, momentum, weightDecay, nesterov);
    steps++;
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
    return List.of(buffer);
  }

  @Override
  public void close() {
    buffer.close();
  }
}
