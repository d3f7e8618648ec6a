package dev.ramtrain.trainer.backend;

import java.nio.FloatBuffer;

/**
 * One SGD step's arithmetic (torch.optim.SGD's: L2 weight decay, momentum, optional Nesterov),
 * shared by the CPU backend's kernel and the offloaded trainer's host step.
 */
public record SgdMath(float lr, float momentum, float weightDecay, boolean nesterov) {

  /** Updates elements [from, to) of the parameter and its momentum buffer in place. */
  public void update(FloatBuffer param, FloatBuffer grad, FloatBuffer buf, int from, int to) {
    for (int i = from; i < to; i++) {
      float g = grad.get(i) + weightDecay * param.get(i);
      if (momentum != 0) {
        float b = momentum * buf.get(i) + g;
        buf.put(i, b);
        g = nesterov ? g + momentum * b : b;
      }
      param.put(i, param.get(i) - lr * g);
    }
  }
}
