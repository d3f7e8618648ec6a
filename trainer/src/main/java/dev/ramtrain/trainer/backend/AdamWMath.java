package dev.ramtrain.trainer.backend;

import java.nio.FloatBuffer;

/**
 * One AdamW step's arithmetic (torch.optim.AdamW's, decoupled weight decay), shared by the CPU
 * backend's kernel and the offloaded trainer's host step, so both give the same bits.
 */
public record AdamWMath(
    float beta1, float beta2, float eps, float decay, float stepSize, float sqrtCorrection) {

  /** The coefficients of step {@code step} (1-based). */
  public static AdamWMath of(float lr, float beta1, float beta2, float eps, float wd, int step) {
    return new AdamWMath(
        beta1,
        beta2,
        eps,
        1 - lr * wd,
        (float) (lr / (1 - Math.pow(beta1, step))),
        (float) Math.sqrt(1 - Math.pow(beta2, step)));
  }

  /** Updates elements [from, to) of the parameter and its moments in place. */
  public void update(
      FloatBuffer param, FloatBuffer grad, FloatBuffer m, FloatBuffer v, int from, int to) {
    for (int i = from; i < to; i++) {
      float g = grad.get(i);
      float mi = beta1 * m.get(i) + (1 - beta1) * g;
      float vi = beta2 * v.get(i) + (1 - beta2) * g * g;
      m.put(i, mi);
      v.put(i, vi);
      float denom = (float) Math.sqrt(vi) / sqrtCorrection + eps;
      param.put(i, param.get(i) * decay - stepSize * mi / denom);
    }
  }
}
