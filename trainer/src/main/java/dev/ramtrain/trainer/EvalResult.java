package dev.ramtrain.trainer;

import java.io.Serializable;
import java.util.List;
import java.util.function.UnaryOperator;

/**
 * Loss, accuracy and confusion matrix ([true][predicted]) over a whole split, and the most
 * confident mistakes seen, most confident first (for the report's grid of images).
 */
public record EvalResult(
    double loss, double accuracy, long samples, long[][] confusion, List<Mistake> mistakes)
    implements Serializable {

  public EvalResult {
    mistakes = List.copyOf(mistakes);
  }

  /**
   * A misclassified sample: its true and predicted class, the softmax probability the model gave
   * its prediction, and its image as the loader read it (uint8, height × width × channels).
   */
  public record Mistake(
      long sample,
      int truth,
      int predicted,
      float confidence,
      int height,
      int width,
      int channels,
      byte[] pixels)
      implements Serializable {}

  public double classAccuracy(int c) {
    long total = 0;
    for (long n : confusion[c]) {
      total += n;
    }
    return total == 0 ? Double.NaN : (double) confusion[c][c] / total;
  }

  /**
   * The evaluation of the union of disjoint shares of a split, from this share's and a function
   * that sums figures over all shares (the data-parallel ranks). Counts are exact in doubles up to
   * 2^53. The mistakes stay this share's own: images are not exchanged between ranks.
   */
  public static EvalResult sum(EvalResult share, UnaryOperator<double[]> sumOverShares) {
    int classes = share.confusion.length;
    double[] figures = new double[2 + classes * classes];
    figures[0] = share.loss * share.samples;
    figures[1] = share.samples;
    for (int t = 0; t < classes; t++) {
      for (int p = 0; p < classes; p++) {
        figures[2 + t * classes + p] = share.confusion[t][p];
      }
    }
    double[] all = sumOverShares.apply(figures);
    long[][] confusion = new long[classes][classes];
    long correct = 0;
    for (int t = 0; t < classes; t++) {
      for (int p = 0; p < classes; p++) {
        confusion[t][p] = (long) all[2 + t * classes + p];
      }
      correct += confusion[t][t];
    }
    long samples = (long) all[1];
    return new EvalResult(
        all[0] / samples, (double) correct / samples, samples, confusion, share.mistakes);
  }
}
