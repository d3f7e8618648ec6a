package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The best epoch and early stopping, as Keras' EarlyStopping(monitor, mode, patience, min_delta).
 */
class BestEpochTest {
  private static EvalResult eval(double loss, double accuracy) {
    return new EvalResult(loss, accuracy, 10, new long[][] {{1}}, List.of());
  }

  /** Offers the losses in turn; returns the epochs that improved, stopping when told to. */
  private static List<Integer> run(BestEpoch best, double... losses) {
    List<Integer> improved = new ArrayList<>();
    for (int e = 1; e <= losses.length; e++) {
      if (best.offer(e, eval(losses[e - 1], 0))) {
        improved.add(e);
      }
      if (best.shouldStop()) {
        improved.add(-e); // stopped after epoch e
        break;
      }
    }
    return improved;
  }

  @Test
  void lossMustFallByMoreThanMinDeltaAndPatienceCountsEpochsInARow() {
    BestEpoch best = new BestEpoch(new BestEpoch.Rule(BestEpoch.Metric.VAL_LOSS, 2, 0.01));
    // 0.895 is not better than 0.9 by more than 0.01; 0.85 is; then two epochs without: stop.
    assertEquals(List.of(1, 3, -5), run(best, 0.9, 0.895, 0.85, 0.86, 0.845, 0.1));
    assertEquals(3, best.bestEpoch());
    assertEquals(0.85, best.best());
  }

  @Test
  void withoutPatienceItNeverStopsButStillKnowsTheBest() {
    BestEpoch best = new BestEpoch(BestEpoch.Rule.DEFAULT);
    assertEquals(List.of(1, 2, 5), run(best, 1.0, 0.5, 0.6, 0.7, 0.4, 0.45));
    assertFalse(best.shouldStop());
    assertEquals(5, best.bestEpoch());
  }

  @Test
  void accuracyImprovesUpwards() {
    BestEpoch best = new BestEpoch(new BestEpoch.Rule(BestEpoch.Metric.VAL_ACC, 1, 0));
    assertTrue(best.offer(1, eval(9, 0.5)));
    assertTrue(best.offer(2, eval(9, 0.6)));
    assertFalse(best.offer(3, eval(0.1, 0.6)), "equal is no improvement");
    assertTrue(best.shouldStop());
  }

  @Test
  void aResumedRunCountsOnFromItsCheckpoint() {
    BestEpoch.Rule rule = new BestEpoch.Rule(BestEpoch.Metric.VAL_LOSS, 2, 0);
    BestEpoch first = new BestEpoch(rule);
    run(first, 0.9, 0.8, 0.85);
    Map<String, Object> state = first.state();
    BestEpoch resumed = new BestEpoch(rule);
    resumed.resume(state);
    assertEquals(2, resumed.bestEpoch());
    assertEquals(1, resumed.epochsSinceBest());
    assertFalse(resumed.offer(4, eval(0.81, 0)));
    assertTrue(resumed.shouldStop(), "the epoch before the resume counts");
    BestEpoch otherMetric = new BestEpoch(new BestEpoch.Rule(BestEpoch.Metric.VAL_ACC, 2, 0));
    otherMetric.resume(state);
    assertEquals(0, otherMetric.bestEpoch(), "a best by another metric is not taken over");
    assertEquals(Map.of(), new BestEpoch(rule).state(), "nothing recorded before an epoch");
  }
}
