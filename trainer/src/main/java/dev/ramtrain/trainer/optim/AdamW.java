package dev.ramtrain.trainer.optim;

import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.DType;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.nn.Parameters;
import java.util.List;

/** AdamW with decoupled weight decay, as torch.optim.AdamW; one fused, multi-threaded kernel. */
public final class AdamW implements Optimizer {
  private final Backend backend;
  private final float beta1;
  private final float beta2;
  private final float eps;
  private final float weightDecay;
  private final DeviceBuffer m;
  private final DeviceBuffer v;
  private int steps;

  public AdamW(
      Backend backend, long parameters, float beta1, float beta2, float eps, float weightDecay) {
    if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1 || eps <= 0) {
      throw new IllegalArgumentException("AdamW needs 0 <= beta < 1 and eps > 0");
    }
    this.backend = backend;
    this.beta1 = beta1;
    this.beta2 = beta2;
    this.eps = eps;
    this.weightDecay = weightDecay;
    this.m = backend.allocate("adamw.m", DType.F32, parameters);
    this.v = backend.allocate("adamw.v", DType.F32, parameters);
  }

  @Override
  public void step(Stream stream, Parameters p, float lr) {
    steps++;
    backend.adamwStep(
        stream, p.values(), p.grads(), m, v, lr, beta1, beta2, eps, weightDecay, steps);
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
    return List.of(m, v);
  }

  @Override
  public void close() {
    m.close();
    v.close();
  }
}
