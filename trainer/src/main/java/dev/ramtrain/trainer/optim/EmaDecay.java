package dev.ramtrain.trainer.optim;

import java.io.Serializable;

/**
 * The decay of the weights' moving average ({@code --ema}) at each update. Without warm-up the same
 * {@code decay} every time. With it, timm's ModelEmaV3 ({@code use_warmup}, its gamma 1 and power
 * 2/3): the n-th update (from 1) decays by {@code min(decay, 1 − n^(−2/3))}, so the first copies
 * the weights and a short run's average follows them (at decay 0.9998 the average has moved 1.2% of
 * the way after 60 plain updates, 99% after 23,000), the decay reaching {@code decay} after {@code
 * (1 − decay)^(−3/2)} updates (353,553 at 0.9998).
 */
public record EmaDecay(float decay, boolean warmup) implements Serializable {
  public EmaDecay {
    MovingAverage.weightOf(decay); // checks the range
  }

  /** The lerp's weight {@code 1 − decay} at update {@code n} (1 for the first with warm-up). */
  public float weightAt(long n) {
    if (n < 1) {
      throw new IllegalArgumentException("EMA updates count from 1, got " + n);
    }
    float constant = MovingAverage.weightOf(decay);
    if (!warmup) {
      return constant;
    }
    double warm = 1 - Math.pow(n, -2.0 / 3); // timm: 1 − (1 + (n − 1) / gamma)^−power
    return warm >= decay ? constant : (float) (1 - warm);
  }
}
