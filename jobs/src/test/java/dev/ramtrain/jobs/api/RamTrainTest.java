package dev.ramtrain.jobs.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.jobs.RunMetrics;
import dev.ramtrain.settings.ConfigException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The facade's settings and its usage errors, which a note shows as the paragraph's error. */
class RamTrainTest {
  private static SparkSession spark;
  @TempDir Path tmp;

  @BeforeAll
  static void session() {
    spark =
        SparkSession.builder()
            .master("local[2]")
            .appName("RamTrainTest")
            .config("spark.ui.enabled", "false")
            .config("spark.ramtrain.train.epochs", "7")
            .getOrCreate();
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  @Test
  void settingsComeFromDefaultsThenSparkPropertiesThenCode() {
    RamTrain rt = RamTrain.on(spark);
    assertEquals("7", rt.setting("ramtrain.train.epochs"), "the interpreter's property");
    assertEquals("256", rt.setting("ramtrain.train.batch-size"), "the default");
    RamTrain mine = rt.set("ramtrain.train.epochs", 2);
    assertEquals("2", mine.setting("ramtrain.train.epochs"), "code beats the property");
    assertEquals("7", rt.setting("ramtrain.train.epochs"), "set returns a copy");
  }

  @Test
  void badSettingsAreRefusedWhereTheyAreGivenNamingTheKey() {
    RamTrain rt = RamTrain.on(spark);
    ConfigException typo =
        assertThrows(ConfigException.class, () -> rt.set("ramtrain.train.epoch", 3));
    assertTrue(typo.getMessage().contains("ramtrain.train.epochs"), typo.getMessage());
    ConfigException kind =
        assertThrows(ConfigException.class, () -> rt.set("ramtrain.train.epochs", "three"));
    assertTrue(kind.getMessage().contains("ramtrain.train.epochs"), kind.getMessage());
    spark.conf().set("spark.ramtrain.train.lr", "fast");
    try {
      ConfigException property = assertThrows(ConfigException.class, () -> RamTrain.on(spark));
      assertTrue(property.getMessage().contains("spark.ramtrain.train.lr"), property.getMessage());
    } finally {
      spark.conf().unset("spark.ramtrain.train.lr");
    }
  }

  @Test
  void aModelThatDoesNotFitTheDataIsRefusedBeforeTrainingStarts() throws Exception {
    RamTrain rt = RamTrain.on(spark).set("ramtrain.generate.images-per-class", 4);
    Path images = tmp.resolve("images");
    assertEquals(24, rt.generateShapes(images.toString()));
    Path dataset = tmp.resolve("ds");
    Inspection ds =
        rt.set("ramtrain.etl.height", 8)
            .set("ramtrain.etl.width", 8)
            .preprocess(images.toString(), dataset.toString());
    assertEquals(6, ds.classes().size());
    assertEquals(24, ds.samples("train") + ds.samples("val"));
    assertEquals(12, ds.classBalance().count(), "6 classes × 2 splits");
    ConfigException wrongClasses =
        assertThrows(
            ConfigException.class,
            () ->
                rt.set("ramtrain.train.model", "mlp:192-8-3")
                    .train(dataset.toString(), tmp.resolve("run").toString()));
    assertTrue(wrongClasses.getMessage().contains("6 classes"), wrongClasses.getMessage());
    assertFalse(Files.exists(tmp.resolve("run")), "nothing started, nothing written");
    // Cancelled while it trains: await throws; resumed, the run ends from its latest checkpoint.
    RamTrain long_ =
        rt.set("ramtrain.train.model", "mlp:192-8-6")
            .set("ramtrain.train.epochs", 1_000_000)
            .set("ramtrain.train.batch-size", 4)
            .set("ramtrain.train.threads", 1);
    Training cancelled = long_.train(dataset.toString(), tmp.resolve("cancelled").toString());
    Path latest = tmp.resolve("cancelled/checkpoints/latest");
    for (int i = 0; i < 1200 && !Files.exists(latest); i++) {
      Thread.sleep(50); // until the first checkpoint (a DataFrame here would wait for a core)
    }
    cancelled.cancel();
    // A cancel that did not stop the run would leave await running: 60 s is far beyond a step.
    assertThrows(
        Exception.class,
        () -> assertTimeoutPreemptively(Duration.ofSeconds(60), () -> cancelled.await()));
    assertTrue(cancelled.isDone());
    long epochsDone = cancelled.epochs().count();
    assertTrue(epochsDone >= 1, "stopped after " + epochsDone + " epochs");
    Training resumed =
        long_
            .set("ramtrain.train.epochs", epochsDone + 1)
            .resume(dataset.toString(), tmp.resolve("cancelled").toString());
    resumed.await();
    assertEquals(epochsDone + 1, resumed.epochs().count(), "one more epoch after the resume");

    // In memory, as pipeline does: shards cached on the executors, trained on, closed.
    try (var shards =
        rt.set("ramtrain.etl.height", 8)
            .set("ramtrain.etl.width", 8)
            .preprocessInMemory(images.toString())) {
      Training run =
          rt.set("ramtrain.train.model", "mlp:192-8-6")
              .set("ramtrain.train.epochs", 2)
              .set("ramtrain.train.batch-size", 4)
              .set("ramtrain.train.threads", 1)
              .train(shards, tmp.resolve("memory-run").toString());
      Training.Result result = run.await();
      assertEquals(ds.samples("val"), result.samples(), "every val sample evaluated once");
      assertEquals(2, run.epochs().count());
      assertTrue(run.steps().count() > 0);
      assertTrue(Files.exists(tmp.resolve("memory-run/report/index.html")));
    }
    ConfigException plan =
        assertThrows(ConfigException.class, () -> rt.plan("mlp:192-8-3", 32, "8x8"));
    assertTrue(plan.getMessage().contains("HEIGHTxWIDTHxCHANNELS"), plan.getMessage());
  }

  /**
   * A run trained in bf16 is evaluated and served in bf16, read back from its checkpoint: its own
   * validation loss comes out again (the same arithmetic on the same samples), while the same
   * checkpoint said to be fp32 evaluates and predicts other numbers.
   */
  @Test
  void aBf16RunIsEvaluatedAndServedInBf16() throws Exception {
    RamTrain rt =
        RamTrain.on(spark)
            .set("ramtrain.generate.images-per-class", 6)
            .set("ramtrain.etl.height", 8)
            .set("ramtrain.etl.width", 8);
    Path images = tmp.resolve("images");
    rt.generateShapes(images.toString());
    Path dataset = tmp.resolve("ds");
    rt.preprocess(images.toString(), dataset.toString());
    RamTrain bf16 =
        rt.set("ramtrain.train.model", "cnn:c8-p-f16-6")
            .set("ramtrain.train.precision", "bf16")
            .set("ramtrain.train.epochs", 1)
            .set("ramtrain.train.batch-size", 4)
            .set("ramtrain.train.threads", 1);
    Path run = tmp.resolve("run");
    bf16.train(dataset.toString(), run.toString()).await();
    List<String> epochs = RunMetrics.epochs(run);
    double trainedValLoss = RunMetrics.figure(epochs.get(epochs.size() - 1), "val_loss");

    // Evaluated with the settings' defaults (fp32 among them): the checkpoint's precision wins.
    RamTrain serving = rt.set("ramtrain.train.batch-size", 4).set("ramtrain.train.threads", 1);
    double evaluated = serving.evaluate(run.toString(), dataset.toString()).loss();
    // The same layers, weights, samples and batches as training's own evaluation: float32 sums
    // of the batch losses in another order at most (bf16 against fp32 differs by ~1e-3).
    assertEquals(trainedValLoss, evaluated, 1e-6 * trainedValLoss, "evaluated as trained");

    // checkpoints/latest is a file naming the latest checkpoint's folder.
    Path latest =
        run.resolve("checkpoints")
            .resolve(Files.readString(run.resolve("checkpoints/latest")).strip());
    Path asFp32 = tmp.resolve("as-fp32");
    Files.createDirectories(asFp32);
    try (var files = Files.list(latest)) {
      for (Path f : files.toList()) {
        Files.copy(f, asFp32.resolve(f.getFileName()));
      }
    }
    Path state = asFp32.resolve("state.json");
    String text = Files.readString(state);
    assertTrue(text.contains("\"precision\" : \"bf16\""), text);
    Files.writeString(state, text.replace("\"precision\" : \"bf16\"", "\"precision\" : \"fp32\""));
    double inFp32 = serving.evaluate(asFp32.toString(), dataset.toString()).loss();
    assertNotEquals(evaluated, inFp32, "fp32 arithmetic gives another loss");

    Path square = images.resolve("square");
    List<Double> served = probabilities(serving.predict(run.toString(), square.toString()));
    List<Double> servedFp32 = probabilities(serving.predict(asFp32.toString(), square.toString()));
    assertEquals(6, served.size());
    assertNotEquals(servedFp32, served, "predict serves the checkpoint's precision");
  }

  private static List<Double> probabilities(
      org.apache.spark.sql.Dataset<org.apache.spark.sql.Row> rows) {
    return rows.orderBy("path").collectAsList().stream()
        .map(r -> r.<Double>getAs("probability"))
        .toList();
  }
}
