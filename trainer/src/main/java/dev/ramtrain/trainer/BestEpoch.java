package dev.ramtrain.trainer;

import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Which epoch's checkpoint is the best so far by a validation metric, and when to stop early: as
 * Keras' and Lightning's EarlyStopping (monitor, mode, patience, min_delta). An epoch improves when
 * its metric beats the best by more than {@code minDelta}; with {@code patience} > 0 training stops
 * after that many epochs in a row without improvement. Checkpoints carry the state, so a resumed
 * run counts on where it stopped.
 */
public final class BestEpoch {
  /** The validation figure that ranks the epochs. */
  public enum Metric {
    VAL_LOSS("val_loss", false),
    VAL_ACC("val_acc", true);

    private final String key;
    private final boolean higherIsBetter;

    Metric(String key, boolean higherIsBetter) {
      this.key = key;
      this.higherIsBetter = higherIsBetter;
    }

    /** Its name in metrics.jsonl and state.json. */
    public String key() {
      return key;
    }

    double of(EvalResult eval) {
      return this == VAL_LOSS ? eval.loss() : eval.accuracy();
    }
  }

  /** The rule: {@code patience} 0 never stops early. */
  public record Rule(Metric metric, int patience, double minDelta) implements Serializable {
    public static final Rule DEFAULT = new Rule(Metric.VAL_LOSS, 0, 0);

    public Rule {
      if (patience < 0 || !(minDelta >= 0)) {
        throw new IllegalArgumentException("patience and min-delta must be >= 0");
      }
    }
  }

  private final Rule rule;
  private double best = Double.NaN;
  private int bestEpoch; // 0: none yet
  private int sinceBest;

  public BestEpoch(Rule rule) {
    this.rule = rule;
  }

  /** Takes epoch {@code epoch}'s evaluation (epochs from 1); true when it is the new best. */
  public boolean offer(int epoch, EvalResult eval) {
    double value = rule.metric().of(eval);
    boolean improved =
        bestEpoch == 0
            || (rule.metric().higherIsBetter
                ? value > best + rule.minDelta()
                : value < best - rule.minDelta());
    if (improved) {
      best = value;
      bestEpoch = epoch;
      sinceBest = 0;
    } else {
      sinceBest++;
    }
    return improved;
  }

  /** Whether patience has run out: that many epochs since the best. */
  public boolean shouldStop() {
    return rule.patience() > 0 && sinceBest >= rule.patience();
  }

  public Rule rule() {
    return rule;
  }

  public int bestEpoch() {
    return bestEpoch;
  }

  public double best() {
    return best;
  }

  public int epochsSinceBest() {
    return sinceBest;
  }

  /** What a checkpoint records (state.json "best"), empty before the first epoch. */
  public Map<String, Object> state() {
    if (bestEpoch == 0) {
      return Map.of();
    }
    Map<String, Object> s = new LinkedHashMap<>();
    s.put("metric", rule.metric().key());
    s.put("value", best);
    s.put("epoch", bestEpoch);
    s.put("epochs_since", sinceBest);
    return Map.of("best", s);
  }

  /**
   * Continues from what a checkpoint's state.json recorded (its "best"); a checkpoint without it,
   * or ranked by another metric, starts afresh.
   */
  public void resume(Map<String, Object> checkpointState) {
    if (!(checkpointState.get("best") instanceof Map<?, ?> s)
        || !rule.metric().key().equals(s.get("metric"))
        || !(s.get("value") instanceof Number value)
        || !(s.get("epoch") instanceof Number epoch)
        || !(s.get("epochs_since") instanceof Number since)) {
      return;
    }
    best = value.doubleValue();
    bestEpoch = epoch.intValue();
    sinceBest = since.intValue();
  }
}
