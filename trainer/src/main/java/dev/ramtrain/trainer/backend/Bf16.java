package dev.ramtrain.trainer.backend;

/**
 * bfloat16: the top 16 bits of an IEEE float (8 exponent bits, 7 mantissa bits). Conversion from
 * float rounds to nearest, ties to even, as CUDA's {@code __float2bfloat16_rn} and PyTorch do; NaN
 * stays a (quiet) NaN. The reference every backend's conversion kernels must match.
 */
public final class Bf16 {
  private Bf16() {}

  public static short fromFloat(float value) {
    int bits = Float.floatToRawIntBits(value);
    if (Float.isNaN(value)) {
      return (short) ((bits >>> 16) | 0x0040);
    }
    int lsb = (bits >>> 16) & 1;
    return (short) ((bits + 0x7FFF + lsb) >>> 16);
  }

  public static float toFloat(short value) {
    return Float.intBitsToFloat((value & 0xFFFF) << 16);
  }
}
