package dev.ramtrain.trainer;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Every training step's loss since the last metrics record that carried them, so that metrics.jsonl
 * holds the loss of each step (not one step in {@code log-every}) without a device synchronization
 * per step: the losses are the ones the loop reads anyway. Steps arrive in order.
 */
final class StepLosses {
  private long firstStep = -1;
  private final List<Float> losses = new ArrayList<>(); // null: a skipped step (non-finite loss)
  private double lossSum;
  private long correct;
  private long samples;

  void add(long step, DeviceInputs.Readback rb, int n) {
    at(step);
    losses.add((float) (rb.lossSum() / n));
    lossSum += rb.lossSum();
    correct += rb.correct();
    samples += n;
  }

  void skipped(long step) {
    at(step);
    losses.add(null);
  }

  private void at(long step) {
    if (firstStep < 0) {
      firstStep = step;
    } else if (step != firstStep + losses.size()) {
      throw new IllegalStateException(
          "step " + step + " after step " + (firstStep + losses.size() - 1));
    }
  }

  /**
   * Puts the steps held into {@code record} and forgets them: {@code step_losses} (each step's mean
   * loss, from step {@code step_losses_from}), and {@code loss_mean} and {@code acc_mean} over all
   * their samples. Nothing when no step is held.
   */
  void drainInto(Map<String, Object> record) {
    if (losses.isEmpty()) {
      return;
    }
    record.put("step_losses_from", firstStep);
    record.put("step_losses", new ArrayList<>(losses));
    if (samples > 0) {
      record.put("loss_mean", lossSum / samples);
      record.put("acc_mean", (double) correct / samples);
    }
    firstStep = -1;
    losses.clear();
    lossSum = 0;
    correct = 0;
    samples = 0;
  }
}
