package dev.ramtrain.trainer.backend.cpu;

import java.nio.FloatBuffer;
import org.bytedeco.javacpp.FloatPointer;

/**
 * What oneDNN's normalizations and the backend's operations keep differently, converted: oneDNN
 * keeps a variance and writes scale and shift gradients, the operations keep {@code 1 / sqrt(var +
 * eps)} and add into parameter gradients.
 */
final class NormStatistics {
  private NormStatistics() {}

  /** The operations' inverse deviation from oneDNN's variance. */
  static void inverseOf(FloatPointer variance, float eps, FloatBuffer invStd) {
    for (int i = 0; i < invStd.capacity(); i++) {
      invStd.put(i, (float) (1 / Math.sqrt(variance.get(i) + (double) eps)));
    }
  }

  /**
   * The variance a backward primitive made with epsilon 0 needs for {@code invStd}: {@code 1 /
   * invStd²}, which is var + eps within an ulp or two, so that its {@code 1 / sqrt(var + 0)} is the
   * saved inverse again.
   */
  static void varianceOf(FloatBuffer invStd, FloatPointer variance) {
    for (int i = 0; i < invStd.capacity(); i++) {
      double inv = invStd.get(i);
      variance.put(i, (float) (1 / (inv * inv)));
    }
  }

  /** Adds the scale and shift gradients oneDNN wrote into the backend's. */
  static void accumulate(
      FloatPointer scaleGrad, FloatPointer shiftGrad, FloatBuffer dgamma, FloatBuffer dbeta) {
    for (int j = 0; j < dgamma.capacity(); j++) {
      dgamma.put(j, dgamma.get(j) + scaleGrad.get(j));
      dbeta.put(j, dbeta.get(j) + shiftGrad.get(j));
    }
  }
}
