package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.optim.LrSchedule;
import dev.ramtrain.trainer.optim.Sgd;
import dev.ramtrain.trainer.optim.SgdSpec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code accumulate = N} with batches of B trains as batches of N·B: one optimizer step per group,
 * the group's gradient the mean over its samples (a short last group weighed by its samples), the
 * remainder rule applied to whole groups, the same learning rates. Exactly what N ranks compute is
 * {@link DataParallelTrainingTest}'s to show; here the comparison with one large batch is of one
 * step from the same weights, within a bound derived from the float arithmetic (the large batch
 * sums in another order, by kernels BLAS picks per CPU), and of the loop's counts, exactly.
 */
class GradientAccumulationTest {
  /**
   * Softmax regression: one Linear layer, so the bound below follows the arithmetic line by line.
   */
  private static final String MODEL = "mlp:64-3";

  private static final double U = 0x1p-24; // float's unit roundoff
  private static final double MAX_INPUT = 2; // pixels in [0, 1] normalized by mean 0.5, std 0.25
  private static final float LR = 0.5f;
  @TempDir Path tmp;

  private record Result(float[] initial, float[] weights, long steps, List<JsonNode> metrics) {}

  private Result train(
      int count, int batch, int accumulate, LoaderSpec.Remainder remainder, int epochs)
      throws Exception {
    Path dir = Files.createTempDirectory(tmp, "run");
    try (Backend b = new CpuBackend(2);
        ShardSet train = PatternShards.write(dir.resolve("train.arrow"), count, 1);
        ShardSet val = PatternShards.write(dir.resolve("val.arrow"), 30, 2);
        DataLoader trainLoader =
            new DataLoader(
                b,
                train,
                new LoaderSpec(
                    batch,
                    2,
                    3,
                    new LoaderSpec.Sampling(7, true, remainder),
                    new LoaderSpec.SampleAugmentation(0, false),
                    new LoaderSpec.Rank(0, 1),
                    accumulate));
        DataLoader valLoader = new DataLoader(b, val, LoaderSpec.evaluation(8, 1))) {
      var stream = b.createStream("setup");
      LoopSpec options =
          new LoopSpec(
              epochs,
              0f,
              0f,
              LoopSpec.NanPolicy.STOP,
              new float[] {0.5f},
              new float[] {0.25f},
              1,
              accumulate,
              BestEpoch.Rule.DEFAULT);
      long total = (long) epochs * options.stepsPerEpoch(trainLoader.batchesPerEpoch());
      Path metricsFile = dir.resolve("metrics.jsonl");
      Model model = Model.build(MODEL, ModelSpec.parse(MODEL), b, stream, batch, 11);
      try (Learner learner =
              new ResidentLearner(
                  b,
                  model,
                  new Sgd(b, model.parameters().count(), new SgdSpec(0.9f, 0f, false)),
                  0f);
          MetricsLog metrics = new MetricsLog(metricsFile);
          Trainer trainer =
              new Trainer(
                  b,
                  learner,
                  LrSchedule.cosine(LR, 0, total, 0),
                  options,
                  PatternShards.SHAPE,
                  metrics)) {
        float[] initial = flat(learner.snapshot(stream).weights());
        trainer.fit(trainLoader, valLoader, 0);
        float[] trained = flat(learner.snapshot(stream).weights());
        List<JsonNode> records = new ArrayList<>();
        metrics.close();
        for (String line : Files.readAllLines(metricsFile)) {
          records.add(new ObjectMapper().readTree(line));
        }
        return new Result(initial, trained, trainer.globalStep(), records);
      }
    }
  }

  private static float[] flat(List<Safetensors.Tensor> tensors) {
    float[] all = new float[tensors.stream().mapToInt(t -> t.values().length).sum()];
    int at = 0;
    for (Safetensors.Tensor t : tensors) {
      System.arraycopy(t.values(), 0, all, at, t.values().length);
      at += t.values().length;
    }
    return all;
  }

  private static double gamma(int n) {
    return n * U / (1 - n * U);
  }

  /**
   * How far one SGD step of a group of {@code n} samples may move any weight away from the exact
   * arithmetic's step, from the weights {@code w} (fc.weight [3, 64] then fc.bias [3]) it starts
   * from, at learning rate {@code lr} (the first step has no momentum yet):
   *
   * <ul>
   *   <li>a logit z = Σ x_i w_i + b over 64 inputs, |x_i| ≤ 2: |ẑ - z| ≤ γ_65 (2 Σ|w_i| + |b|) =
   *       Ez;
   *   <li>d = softmax(z) - onehot: the softmax's Jacobian has rows of absolute sum ≤ 1/2, and its
   *       own rounding (max, exp, sum, divide over 3 classes) ≤ γ_8: |d̂ - d| ≤ Ez / 2 + γ_8 = Ed;
   *   <li>a weight's gradient (1/n) Σ_k x_k d_k: |ĝ - g| ≤ 2 Ed + γ_(n+1) · 2 · 1, whatever order
   *       the n products are added in (the bias's the same with 1 for 2).
   * </ul>
   *
   * Two runs each within that of the exact step differ by at most twice it, times lr.
   */
  private static double oneStepBound(float[] w, int n, double lr) {
    double ez = 0;
    for (int c = 0; c < 3; c++) {
      double sum = Math.abs(w[3 * 64 + c]);
      for (int i = 0; i < 64; i++) {
        sum += MAX_INPUT * Math.abs(w[c * 64 + i]);
      }
      ez = Math.max(ez, gamma(65) * sum);
    }
    double ed = ez / 2 + gamma(8);
    double gradient = MAX_INPUT * ed + gamma(n + 1) * MAX_INPUT;
    return 2 * lr * gradient;
  }

  private static void assertOneStepAlike(Result big, Result accumulated, int n) {
    assertEquals(1, big.steps());
    assertEquals(1, accumulated.steps(), "one optimizer step for the group");
    float[] w0 = big.initial();
    for (int i = 0; i < w0.length; i++) {
      assertEquals(w0[i], accumulated.initial()[i], "the same initial weights");
    }
    double bound = oneStepBound(w0, n, firstLr(big));
    double moved = 0;
    for (int i = 0; i < w0.length; i++) {
      double difference = Math.abs(big.weights()[i] - accumulated.weights()[i]);
      assertTrue(
          difference <= bound,
          "weight " + i + " differs by " + difference + ", more than the bound " + bound);
      moved = Math.max(moved, Math.abs(big.weights()[i] - w0[i]));
    }
    // The bound is far below the step itself, so a group weighed wrongly (a factor of N, or a
    // short batch counted as a full one) would fail it.
    assertTrue(moved > 100 * bound, "the step moved the weights by " + moved + "; bound " + bound);
  }

  private static double firstLr(Result r) {
    return r.metrics().stream()
        .filter(m -> m.get("type").asText().equals("step"))
        .findFirst()
        .orElseThrow()
        .get("lr")
        .asDouble();
  }

  private static List<JsonNode> epochs(Result r) {
    return r.metrics().stream().filter(m -> m.get("type").asText().equals("epoch")).toList();
  }

  private static List<Double> learningRates(Result r) {
    return r.metrics().stream()
        .filter(m -> m.get("type").asText().equals("step"))
        .map(m -> m.get("lr").asDouble())
        .toList();
  }

  @Test
  void fourBatchesOfEightMakeOneStepOfThirtyTwo() throws Exception {
    Result big = train(32, 32, 1, LoaderSpec.Remainder.DROP, 1);
    Result accumulated = train(32, 8, 4, LoaderSpec.Remainder.DROP, 1);
    assertOneStepAlike(big, accumulated, 32);
  }

  @Test
  void aShortLastGroupWeighsItsSamples() throws Exception {
    // 12 samples: one batch of 12, or batches of 8 and 4 in one group of up to four.
    Result big = train(12, 12, 1, LoaderSpec.Remainder.KEEP, 1);
    Result accumulated = train(12, 8, 4, LoaderSpec.Remainder.KEEP, 1);
    assertOneStepAlike(big, accumulated, 12);
  }

  /**
   * 300 samples in groups of 32: drop leaves 9 steps an epoch (the 12 left over, a batch and a half
   * of 8, are not a step), pad and keep make 10; each with the large batch's learning rates.
   */
  @Test
  void theRemainderRuleAppliesToWholeGroups() throws Exception {
    for (LoaderSpec.Remainder remainder : LoaderSpec.Remainder.values()) {
      Result big = train(300, 32, 1, remainder, 2);
      Result accumulated = train(300, 8, 4, remainder, 2);
      long perEpoch = remainder == LoaderSpec.Remainder.DROP ? 9 : 10;
      assertEquals(2 * perEpoch, big.steps(), remainder + ": the large batch's steps");
      assertEquals(2 * perEpoch, accumulated.steps(), remainder + ": one step per group");
      assertEquals(learningRates(big), learningRates(accumulated), remainder.toString());
      for (int e = 0; e < 2; e++) {
        assertEquals(
            epochs(big).get(e).get("step").asLong(),
            epochs(accumulated).get(e).get("step").asLong());
      }
    }
  }
}
