package dev.ramtrain.trainer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.nn.CrossEntropyLoss;
import dev.ramtrain.trainer.nn.Model;
import dev.ramtrain.trainer.nn.ModelSpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The evaluation's most confident mistakes: which are kept, in what order, with which image. */
class EvaluatorTest {
  private static final int SAMPLES = 90;
  @TempDir Path tmp;

  @Test
  void keepsTheMostConfidentMistakesWithTheirOwnImages() throws Exception {
    try (Backend b = new CpuBackend(1);
        ShardSet val = PatternShards.write(tmp.resolve("val.arrow"), SAMPLES, 5)) {
      var stream = b.createStream("setup");
      // Untrained: about two in three samples are mistakes, far more than a report keeps.
      try (Model model =
          Model.build("mlp:64-16-3", ModelSpec.parse("mlp:64-16-3"), b, stream, 32, 3)) {
        check(b, val, model);
      }
    }
  }

  private static void check(Backend b, ShardSet val, Model model) throws Exception {
    List<EvalResult> byBatchSize = new ArrayList<>();
    List<EvalResult> keepingAll = new ArrayList<>();
    for (int batch : new int[] {32, 7}) {
      try (CrossEntropyLoss loss = new CrossEntropyLoss(b, 32, 3, 0f);
          DeviceInputs inputs =
              new DeviceInputs(
                  b,
                  b.createStream("compute"),
                  PatternShards.SHAPE,
                  32,
                  3,
                  new float[] {0.5f},
                  new float[] {0.25f});
          DataLoader loader = new DataLoader(b, val, LoaderSpec.evaluation(batch, 1))) {
        byBatchSize.add(Evaluator.evaluate(model, loss, inputs, loader));
        keepingAll.add(Evaluator.evaluate(model, loss, inputs, loader, SAMPLES));
      }
    }
    EvalResult result = byBatchSize.get(0);
    List<EvalResult.Mistake> all = keepingAll.get(0).mistakes();
    long wrong = SAMPLES - Math.round(result.accuracy() * SAMPLES);
    assertTrue(wrong > Evaluator.MISTAKES, "an untrained model errs often: " + wrong);
    assertEquals(wrong, all.size(), "keeping room for every sample keeps every mistake");
    assertEquals(Evaluator.MISTAKES, result.mistakes().size());
    for (int i = 0; i < Evaluator.MISTAKES; i++) {
      EvalResult.Mistake kept = result.mistakes().get(i);
      assertEquals(all.get(i).sample(), kept.sample(), "mistake " + i + " is the " + i + "-th");
      assertEquals(all.get(i).confidence(), kept.confidence());
      EvalResult.Mistake sameAt7 = byBatchSize.get(1).mistakes().get(i);
      assertEquals(kept.sample(), sameAt7.sample(), "batch size changes nothing");
      assertEquals(kept.confidence(), sameAt7.confidence(), 1e-5);
    }
    long[][] seen = new long[3][3];
    float previous = Float.POSITIVE_INFINITY;
    ShardReader shard = val.readers().get(0);
    for (EvalResult.Mistake m : all) {
      assertNotEquals(m.truth(), m.predicted());
      assertTrue(m.confidence() <= previous, "most confident first");
      assertTrue(m.confidence() > 1 / 3f && m.confidence() <= 1, "a winning softmax share");
      previous = m.confidence();
      seen[m.truth()][m.predicted()]++;
      long row = m.sample(); // the evaluation loader reads the shard's rows in order
      for (int batch = 0; row >= 0; batch++) {
        try (ShardBatch rows = shard.batch(batch)) {
          if (row < rows.rowCount()) {
            assertEquals(rows.label((int) row), m.truth(), "sample " + m.sample());
            assertArrayEquals(rows.image((int) row), m.pixels(), "sample " + m.sample());
          }
          row -= rows.rowCount();
        }
      }
      assertEquals(8, m.height());
      assertEquals(1, m.channels());
    }
    for (int t = 0; t < 3; t++) {
      for (int p = 0; p < 3; p++) {
        assertEquals(t == p ? 0 : result.confusion()[t][p], seen[t][p], t + "→" + p);
      }
    }
  }
}
