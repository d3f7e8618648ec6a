package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderOptions;
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
 * {@code accumulate = N} with batches of B trains as batches of N·B: the same weights within float
 * tolerance (the sums run in another order), the same number of optimizer steps and learning rates,
 * a short last group weighted by its samples. SGD with momentum, because its update scales with the
 * gradient: a missing division by N would show (AdamW's would mostly hide it).
 */
class GradientAccumulationTest {
  private static final int EPOCHS = 2;
  @TempDir Path tmp;

  private record Result(float[] weights, long steps, List<JsonNode> metrics) {}

  private Result train(int count, int batch, int accumulate, LoaderOptions.Remainder remainder)
      throws Exception {
    Path dir = Files.createTempDirectory(tmp, "run");
    try (Backend b = new CpuBackend(2);
        ShardSet train = PatternShards.write(dir.resolve("train.arrow"), count, 1);
        ShardSet val = PatternShards.write(dir.resolve("val.arrow"), 30, 2);
        DataLoader trainLoader =
            new DataLoader(
                b,
                train,
                new LoaderOptions(
                    batch,
                    2,
                    3,
                    new LoaderOptions.Sampling(7, true, remainder),
                    new LoaderOptions.Augmentation(0, false),
                    new LoaderOptions.Rank(0, 1)));
        DataLoader valLoader = new DataLoader(b, val, LoaderOptions.evaluation(8, 1))) {
      var stream = b.createStream("setup");
      TrainOptions options =
          new TrainOptions(
              EPOCHS,
              0f,
              0f,
              TrainOptions.NanPolicy.STOP,
              new float[] {0.5f},
              new float[] {0.25f},
              3,
              accumulate,
              BestEpoch.Rule.DEFAULT);
      long total = (long) EPOCHS * options.stepsPerEpoch(trainLoader.batchesPerEpoch());
      Path metricsFile = dir.resolve("metrics.jsonl");
      Model model =
          Model.build("mlp:64-32-3", ModelSpec.parse("mlp:64-32-3"), b, stream, batch, 11);
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
                  LrSchedule.cosine(0.05, 2, total, 0),
                  options,
                  PatternShards.SHAPE,
                  metrics)) {
        trainer.fit(trainLoader, valLoader, 0);
        List<Safetensors.Tensor> saved = learner.snapshot(stream).weights();
        float[] all = new float[saved.stream().mapToInt(t -> t.values().length).sum()];
        int at = 0;
        for (Safetensors.Tensor t : saved) {
          System.arraycopy(t.values(), 0, all, at, t.values().length);
          at += t.values().length;
        }
        List<JsonNode> records = new ArrayList<>();
        metrics.close();
        for (String line : Files.readAllLines(metricsFile)) {
          records.add(new ObjectMapper().readTree(line));
        }
        return new Result(all, trainer.globalStep(), records);
      }
    }
  }

  private static void assertSameTraining(Result big, Result accumulated) {
    assertEquals(big.steps(), accumulated.steps(), "one optimizer step per group of batches");
    double worst = 0;
    double largest = 0;
    for (int i = 0; i < big.weights().length; i++) {
      worst = Math.max(worst, Math.abs(big.weights()[i] - accumulated.weights()[i]));
      largest = Math.max(largest, Math.abs(big.weights()[i]));
    }
    assertTrue(worst < 2e-5 * Math.max(1, largest), "weights differ by " + worst);
    List<JsonNode> bigEpochs = epochs(big);
    List<JsonNode> accEpochs = epochs(accumulated);
    for (int e = 0; e < EPOCHS; e++) {
      assertEquals(
          bigEpochs.get(e).get("train_loss").asDouble(),
          accEpochs.get(e).get("train_loss").asDouble(),
          1e-5);
      assertEquals(bigEpochs.get(e).get("step").asLong(), accEpochs.get(e).get("step").asLong());
    }
    // Every optimizer step has one loss, the mean over its group's samples.
    assertEquals(stepLosses(big).size(), stepLosses(accumulated).size());
    for (int s = 0; s < stepLosses(big).size(); s++) {
      assertEquals(stepLosses(big).get(s), stepLosses(accumulated).get(s), 1e-5, "step " + s);
    }
  }

  private static List<JsonNode> epochs(Result r) {
    return r.metrics().stream().filter(m -> m.get("type").asText().equals("epoch")).toList();
  }

  private static List<Double> stepLosses(Result r) {
    List<Double> losses = new ArrayList<>();
    for (JsonNode m : r.metrics()) {
      m.path("step_losses").forEach(l -> losses.add(l.asDouble()));
    }
    return losses;
  }

  @Test
  void fourBatchesOfEightTrainAsOneOfThirtyTwo() throws Exception {
    Result big = train(320, 32, 1, LoaderOptions.Remainder.DROP);
    Result accumulated = train(320, 8, 4, LoaderOptions.Remainder.DROP);
    assertEquals(2 * 10, accumulated.steps());
    assertSameTraining(big, accumulated);
  }

  @Test
  void aShortLastGroupWeighsItsSamples() throws Exception {
    // 300 samples: 9 batches of 32 and one of 12, or 37 of 8 and one of 4 in groups of four,
    // the last group two batches (8 + 4 samples): the same ten steps.
    Result big = train(300, 32, 1, LoaderOptions.Remainder.KEEP);
    Result accumulated = train(300, 8, 4, LoaderOptions.Remainder.KEEP);
    assertEquals(2 * 10, accumulated.steps());
    assertSameTraining(big, accumulated);
  }
}
