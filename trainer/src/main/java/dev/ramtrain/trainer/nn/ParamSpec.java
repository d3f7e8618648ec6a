package dev.ramtrain.trainer.nn;

import java.util.Arrays;

/** A parameter a layer declares: its name, shape and how it starts. */
public record ParamSpec(String name, int[] shape, Init init, int fanIn) {

  /**
   * PyTorch's defaults: Linear/Conv weights and biases uniform in ±1/sqrt(fan_in); BN ones/zeros.
   */
  public enum Init {
    /** kaiming_uniform_(a=sqrt(5)): U(-b, b) with b = sqrt(1 / fan_in). */
    KAIMING_UNIFORM,
    /** Bias of Linear/Conv: U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
    FAN_IN_UNIFORM,
    ONES,
    ZEROS,
    /**
     * timm's trunc_normal_(std=.02) for transformer weights and position embeddings: normal with
     * standard deviation 0.02, drawn again outside [-2, 2] (100 deviations: in practice never).
     */
    TRUNC_NORMAL,
    /** ConvNeXt's layer_scale_init_value: every factor 1e-6. */
    LAYER_SCALE
  }

  public long count() {
    long n = 1;
    for (int d : shape) {
      n *= d;
    }
    return n;
  }

  @Override
  public String toString() {
    return name + Arrays.toString(shape);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ParamSpec p
        && p.name.equals(name)
        && Arrays.equals(p.shape, shape)
        && p.init == init
        && p.fanIn == fanIn;
  }

  @Override
  public int hashCode() {
    return name.hashCode() * 31 + Arrays.hashCode(shape);
  }
}
