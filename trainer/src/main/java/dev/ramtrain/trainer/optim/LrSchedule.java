package dev.ramtrain.trainer.optim;

/** The learning rate at each optimizer step (0-based), as PyTorch's schedulers compute it. */
public interface LrSchedule {
  double lr(long step);

  static LrSchedule constant(double lr) {
    return step -> lr;
  }

  /** StepLR: {@code lr * gamma^(step / every)}. */
  static LrSchedule stepDecay(double lr, long every, double gamma) {
    if (every < 1) {
      throw new IllegalArgumentException("step decay needs every >= 1");
    }
    return step -> lr * Math.pow(gamma, step / every);
  }

  /**
   * Linear warm-up from 0 over {@code warmup} steps, then cosine down to {@code minLr} at {@code
   * total}.
   */
  static LrSchedule cosine(double lr, long warmup, long total, double minLr) {
    if (total < 1 || warmup < 0 || warmup > total) {
      throw new IllegalArgumentException("cosine schedule needs 0 <= warmup <= total, total >= 1");
    }
    return step -> {
      if (step < warmup) {
        return lr * (step + 1) / warmup;
      }
      double progress = Math.min(1, (double) (step - warmup) / Math.max(1, total - warmup));
      return minLr + 0.5 * (lr - minLr) * (1 + Math.cos(Math.PI * progress));
    };
  }

  /**
   * OneCycleLR (cosine annealing): from {@code maxLr/divFactor} up to {@code maxLr} over the first
   * {@code pctStart} of {@code total} steps, then down to {@code maxLr/(divFactor*finalDivFactor)}.
   */
  static LrSchedule oneCycle(
      double maxLr, long total, double pctStart, double divFactor, double finalDivFactor) {
    double initial = maxLr / divFactor;
    double minimum = initial / finalDivFactor;
    double upEnd = pctStart * total - 1;
    double downEnd = total - 1;
    return step -> {
      if (step <= upEnd) {
        return anneal(initial, maxLr, upEnd <= 0 ? 1 : step / upEnd);
      }
      return anneal(maxLr, minimum, (step - upEnd) / (downEnd - upEnd));
    };
  }

  private static double anneal(double start, double end, double pct) {
    return end + (start - end) / 2 * (Math.cos(Math.PI * Math.min(1, pct)) + 1);
  }
}
