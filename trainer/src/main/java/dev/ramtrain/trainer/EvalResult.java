package dev.ramtrain.trainer;

import java.io.Serializable;

/** Loss, accuracy and confusion matrix ([true][predicted]) over a whole split. */
public record EvalResult(double loss, double accuracy, long samples, long[][] confusion)
    implements Serializable {
  public double classAccuracy(int c) {
    long total = 0;
    for (long n : confusion[c]) {
      total += n;
    }
    return total == 0 ? Double.NaN : (double) confusion[c][c] / total;
  }
}
