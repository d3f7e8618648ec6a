package dev.ramtrain.trainer.backend;

import java.nio.FloatBuffer;

/**
 * One AdamW step's arithmetic (torch.optim.AdamW's, decoupled weight decay), shared by the CPU
 * backend's kernel and the offloaded trainer's host step, so both give the same bits.
 */
public record AdamWMath(
    float beta1, float beta2, float eps, float decay, float stepSize, float sqrtCorrection) {
  private static final int BLOCK = 2048; // elements per pass: the four arrays stay in L1/L2

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

  /**
   * Updates elements [from, to) of the parameter and its moments in place, a block at a time
   * through arrays: a loop over arrays is one the JIT vectorizes (its square roots and divisions
   * too, each correctly rounded as the scalar ones, so the bits are the same), where element reads
   * of the buffers kept it scalar and compute-bound (2.5 ns per parameter per core).
   */
  public void update(
      FloatBuffer param, FloatBuffer grad, FloatBuffer m, FloatBuffer v, int from, int to) {
    int block = Math.min(BLOCK, Math.max(0, to - from));
    float[] p = new float[block];
    float[] g = new float[block];
    float[] mb = new float[block];
    float[] vb = new float[block];
    for (int start = from; start < to; start += block) {
      int len = Math.min(block, to - start);
      param.get(start, p, 0, len);
      grad.get(start, g, 0, len);
      m.get(start, mb, 0, len);
      v.get(start, vb, 0, len);
      update(p, g, mb, vb, len);
      param.put(start, p, 0, len);
      m.put(start, mb, 0, len);
      v.put(start, vb, 0, len);
    }
  }

  /** The step on the first {@code len} elements of the arrays, in place. */
  private void update(float[] p, float[] g, float[] m, float[] v, int len) {
    float b1 = beta1;
    float b2 = beta2;
    float c1 = 1 - beta1;
    float c2 = 1 - beta2;
    for (int i = 0; i < len; i++) {
      float gi = g[i];
      float mi = b1 * m[i] + c1 * gi;
      float vi = b2 * v[i] + c2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      float denom = (float) Math.sqrt(vi) / sqrtCorrection + eps;
      p[i] = p[i] * decay - stepSize * mi / denom;
    }
  }
}
