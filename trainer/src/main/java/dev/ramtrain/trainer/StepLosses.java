package dev.ramtrain.trainer;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Every training step's loss since the last metrics record that carried them, so that metrics.jsonl
 * holds the loss of each step (not one step in {@code log-every}) without a device synchronization
 * per step: the losses are the ones the loop reads anyway. Steps arrive in order; the micro-batches
 * of an accumulated step arrive under the same step and make one loss, the mean over their samples.
 */
final class StepLosses {
  private long firstStep = -1;
  private final List<double[]> steps = new ArrayList<>(); // {loss sum, samples}; null: skipped
  private double lossSum;
  private long correct;
  private long samples;

  void add(long step, DeviceInputs.Readback rb, int n) {
    double[] last = steps.isEmpty() ? null : steps.get(steps.size() - 1);
    if (last != null && step == firstStep + steps.size() - 1) {
      last[0] += rb.lossSum(); // another micro-batch of the same step
      last[1] += n;
    } else {
      at(step);
      steps.add(new double[] {rb.lossSum(), n});
    }
    lossSum += rb.lossSum();
    correct += rb.correct();
    samples += n;
  }

  void skipped(long step) {
    at(step);
    steps.add(null);
  }

  private void at(long step) {
    if (firstStep < 0) {
      firstStep = step;
    } else if (step != firstStep + steps.size()) {
      throw new IllegalStateException(
          "step " + step + " after step " + (firstStep + steps.size() - 1));
    }
  }

  /**
   * Puts the steps held into {@code record} and forgets them: {@code step_losses} (each step's mean
   * loss, from step {@code step_losses_from}; null for a skipped step), and {@code loss_mean} and
   * {@code acc_mean} over all their samples. Nothing when no step is held.
   */
  void drainInto(Map<String, Object> record) {
    if (steps.isEmpty()) {
      return;
    }
    List<Float> losses = new ArrayList<>();
    for (double[] s : steps) {
      losses.add(s == null ? null : (float) (s[0] / s[1]));
    }
    record.put("step_losses_from", firstStep);
    record.put("step_losses", losses);
    if (samples > 0) {
      record.put("loss_mean", lossSum / samples);
      record.put("acc_mean", (double) correct / samples);
    }
    firstStep = -1;
    steps.clear();
    lossSum = 0;
    correct = 0;
    samples = 0;
  }
}
