package dev.ramtrain.trainer.nn;

import dev.ramtrain.random.Seeds;
import dev.ramtrain.trainer.backend.DeviceBuffer;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.ops.DropoutMask;
import dev.ramtrain.trainer.backend.ops.Multiply;

/**
 * Inverted dropout, as nn.Dropout(p): in training each value is zeroed with probability p and the
 * rest scaled by 1/(1-p); in evaluation it passes the input through. The mask is drawn from (step
 * seed, layer name, element), so a run and its resumed continuation drop the same values.
 */
public final class Dropout extends BaseLayer {
  private final int size;
  private final float p;
  private long stepSeed;
  private DeviceBuffer mask;
  private DeviceBuffer y;
  private DeviceBuffer dx;

  public Dropout(String name, int size, float p) {
    super(name);
    if (!(p >= 0 && p < 1)) {
      throw new IllegalArgumentException(
          name + ": dropout probability must be in [0, 1), got " + p);
    }
    this.size = size;
    this.p = p;
  }

  @Override
  public int inputSize() {
    return size;
  }

  @Override
  public int outputSize() {
    return size;
  }

  /** Evaluation passes its input through. */
  @Override
  public boolean evaluationReturnsInput() {
    return true;
  }

  @Override
  protected void bind(ParameterSource params, int maxBatch) {
    if (inference()) {
      return; // evaluation draws no mask and returns its input
    }
    mask = own("mask", (long) maxBatch * size);
    y = own("out", (long) maxBatch * size);
    dx = inputGradient((long) maxBatch * size);
  }

  @Override
  public void beginStep(long seed) {
    this.stepSeed = Seeds.mix(seed, name.hashCode());
  }

  @Override
  public DeviceBuffer forward(Stream s, DeviceBuffer x, int batch, boolean training) {
    if (!training || p == 0) {
      return x;
    }
    long n = (long) batch * size;
    DeviceBuffer m = mask.view(0, n);
    DeviceBuffer yb = y.view(0, n);
    backend.run(s, new DropoutMask(p, stepSeed, m));
    backend.run(s, new Multiply(x, m, yb));
    return yb;
  }

  @Override
  public DeviceBuffer backward(Stream s, DeviceBuffer dy, int batch, boolean needInputGrad) {
    if (!needInputGrad) {
      return null;
    }
    if (p == 0) {
      return dy;
    }
    long n = (long) batch * size;
    DeviceBuffer dxb = dx.view(0, n);
    backend.run(s, new Multiply(dy, mask.view(0, n), dxb));
    return dxb;
  }
}
