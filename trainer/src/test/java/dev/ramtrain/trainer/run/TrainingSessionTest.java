package dev.ramtrain.trainer.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.LoopSpec;
import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.PatternShards;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.BadSamples;
import dev.ramtrain.trainer.data.CropResampler;
import dev.ramtrain.trainer.data.JpegDecoder;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.nn.Precision;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.ScheduleSpec;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The trainer assembles and runs a training run by itself: shards, a {@link RunSpec} and a folder
 * to write in are all it takes, no job, no Spark and no native image code.
 */
class TrainingSessionTest {
  @TempDir Path tmp;

  /** Raw-pixel shards decode nothing and are never resized: the natives must not be called. */
  private static final ImageNatives NO_NATIVES =
      new ImageNatives() {
        @Override
        public JpegDecoder jpeg() {
          return (jpeg, length, stored, reduce, x, y, width, height, target) -> {
            throw new AssertionError("raw shards decoded a JPEG");
          };
        }

        @Override
        public Supplier<CropResampler> preprocessingResize() {
          throw new AssertionError("the pillow filter asked for OpenCV");
        }
      };

  /** Where rank 0 writes, kept in memory: the checkpoints' names and what they record. */
  private static final class Folder implements RunFolder {
    final Path path;
    final List<String> saved = new ArrayList<>();
    final Map<String, Object> recorded = new TreeMap<>();

    Folder(Path path) {
      this.path = path;
    }

    @Override
    public Path path() {
      return path;
    }

    @Override
    public MetricsLog metrics() throws IOException {
      return new MetricsLog(null);
    }

    @Override
    public void recordInCheckpoints(Map<String, Object> info) {
      recorded.putAll(info);
    }

    @Override
    public Path save(String name, int epochsDone, long globalStep, Checkpoints.Snapshot snapshot) {
      saved.add(name);
      return path.resolve(name);
    }
  }

  private static RunSpec spec(String model, int epochs) {
    int batch = 32;
    RunData data =
        new RunData(
            "",
            LoaderSpec.training(
                batch, 2, 3, 7, LoaderSpec.Remainder.DROP, LoaderSpec.SampleAugmentation.NONE),
            LoaderSpec.evaluation(batch, 1),
            ResizeFilter.PILLOW,
            BadSamples.FAIL,
            0);
    return new RunSpec(
        data,
        new ModelChoice(model, 1, Precision.FP32, "", 0f, 0f, false),
        new AdamWSpec(0.9f, 0.999f, 1e-8f, 0.01f),
        new ScheduleSpec(ScheduleSpec.Kind.CONSTANT, 3e-3, 1, 1, 0, 0),
        new LoopSpec(epochs, 0f, 1f, LoopSpec.NanPolicy.STOP, new float[0], new float[0], 5),
        new OffloadSpec(
            OffloadSpec.Mode.OFF,
            0,
            0,
            2,
            false,
            false,
            0,
            1,
            OffloadSpec.ClipUpdate.AUTO,
            OffloadSpec.OptimizerState.FP32),
        new BackendSpec(BackendSpec.Kind.CPU, 2));
  }

  private static Manifest manifest(long train, long val) {
    Manifest.Split trainSplit = new Manifest.Split(train, 0, List.of(), List.of());
    Manifest.Split valSplit = new Manifest.Split(val, 0, List.of(), List.of());
    return new Manifest(
        Manifest.FORMAT,
        Manifest.VERSION,
        "TrainingSessionTest",
        Manifest.Image.of(PatternShards.SHAPE),
        PatternShards.CLASSES,
        Map.of(Manifest.TRAIN, trainSplit, Manifest.VAL, valSplit),
        new Manifest.Source("patterns", "", Map.of()),
        Map.of("resize", "stretch"),
        1,
        null);
  }

  @Test
  void aRunTrainsCheckpointsAndEvaluatesWithNoJob() throws Exception {
    Folder folder = new Folder(tmp);
    EvalResult eval;
    try (ShardSet train = PatternShards.write(tmp.resolve("train.arrow"), 300, 1);
        ShardSet val = PatternShards.write(tmp.resolve("val.arrow"), 90, 2)) {
      eval =
          TrainingSession.run(
              spec("mlp:64-32-3", 3),
              new TrainingData(train, val, manifest(300, 90), "patterns"),
              new RunOutput(folder, null, Map.of("job", "from the caller"), 0),
              RankContext.SINGLE,
              NO_NATIVES);
    }
    assertEquals(90, eval.samples(), "every val sample evaluated once");
    assertTrue(eval.accuracy() > 0.9, "the patterns are learnt: val accuracy " + eval.accuracy());
    assertEquals(List.of("epoch-0001", "epoch-0002", "epoch-0003"), folder.saved);
    assertEquals("from the caller", folder.recorded.get("job"), "the job's record is kept");
    assertEquals("fp32", folder.recorded.get("precision"));
    assertEquals(PatternShards.CLASSES, folder.recorded.get("classes"));
    assertEquals(List.of(8, 8, 1), folder.recorded.get("image"));
    assertEquals(64L * 32 + 32 + 32 * 3 + 3, folder.recorded.get("parameters"));
    assertEquals(300L, folder.recorded.get("train_samples"));
    assertFalse(folder.recorded.containsKey("eval_crop"), "no crop: images used as stored");
  }

  @Test
  void aModelThatDoesNotFitTheDataIsAUsageErrorBeforeAnythingRuns() throws Exception {
    Folder folder = new Folder(tmp);
    try (ShardSet train = PatternShards.write(tmp.resolve("train.arrow"), 30, 1);
        ShardSet val = PatternShards.write(tmp.resolve("val.arrow"), 9, 2)) {
      ConfigException e =
          assertThrows(
              ConfigException.class,
              () ->
                  TrainingSession.run(
                      spec("mlp:64-32-5", 1),
                      new TrainingData(train, val, manifest(30, 9), "patterns"),
                      new RunOutput(folder, null, Map.of(), 0),
                      RankContext.SINGLE,
                      NO_NATIVES));
      assertTrue(e.getMessage().contains("3 classes"), e.getMessage());
    }
    assertTrue(folder.saved.isEmpty() && folder.recorded.isEmpty(), "nothing written");
  }
}
