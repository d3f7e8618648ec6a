package dev.ramtrain.jobs.config;

import static dev.ramtrain.jobs.config.RamtrainConfig.require;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.TrainOptions;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.data.LoaderOptions;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.offload.HostAdamW;
import dev.ramtrain.trainer.offload.HostSgd;
import dev.ramtrain.trainer.offload.OffloadedLearner;
import dev.ramtrain.trainer.optim.AdamW;
import dev.ramtrain.trainer.optim.LrSchedule;
import dev.ramtrain.trainer.optim.Optimizer;
import dev.ramtrain.trainer.optim.Sgd;
import java.util.List;
import java.util.SortedMap;
import java.util.TreeMap;

/** Turns {@code ramtrain.train.*} settings into the trainer's objects. */
public final class TrainSettings {
  private static final String P = "ramtrain.train.";

  public enum OptimizerKind {
    ADAMW,
    SGD
  }

  public enum Schedule {
    CONSTANT,
    STEP,
    COSINE,
    ONE_CYCLE
  }

  public enum BackendKind {
    CPU
  }

  private final RamtrainConfig c;

  public TrainSettings(RamtrainConfig c) {
    this.c = c;
    require(c.integer(P + "epochs") >= 1, P + "epochs", "must be >= 1");
    require(c.integer(P + "batch-size") >= 1, P + "batch-size", "must be >= 1");
    require(c.number(P + "lr") > 0, P + "lr", "must be > 0");
    require(
        c.integer(P + "workers") >= 1 && c.integer(P + "prefetch") >= 1,
        P + "workers/prefetch",
        "must be >= 1");
    c.choice(P + "backend", BackendKind.class);
  }

  public String dataset() {
    String d = c.string(P + "dataset");
    require(!d.isBlank(), P + "dataset", "a dataset directory is required (--dataset DIR)");
    return d;
  }

  public String output() {
    return c.string(P + "output");
  }

  public String model() {
    return c.string(P + "model");
  }

  /** Replace the run in the output directory ({@code --overwrite}). */
  public boolean overwrite() {
    return c.bool(P + "overwrite");
  }

  /** The model's layers for images of {@code shape}, unbound: nothing is allocated. */
  public List<Layer> layers(ImageShape shape) {
    return parseModel(P + "model", model(), shape);
  }

  /** Parses a model spec; a bad one is a usage error naming {@code key}. */
  public static List<Layer> parseModel(String key, String spec, ImageShape shape) {
    try {
      return ModelSpec.parse(spec, shape);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(key + " = '" + spec + "': " + e.getMessage());
    }
  }

  /**
   * Fails, naming the key, unless the model takes images of {@code shape} and has one output per
   * class: checked before anything is allocated, instead of failing in the first step.
   */
  public void requireModelFits(ImageShape shape, List<String> classes) {
    List<Layer> layers = layers(shape);
    int in = layers.get(0).inputSize();
    int out = layers.get(layers.size() - 1).outputSize();
    if (in != shape.bytes()) {
      throw new ConfigException(
          String.format(
              "%smodel = '%s' takes %d values per sample; the dataset's images are %dx%dx%d = %d",
              P, model(), in, shape.height(), shape.width(), shape.channels(), shape.bytes()));
    }
    if (out != classes.size()) {
      throw new ConfigException(
          String.format(
              "%smodel = '%s' has %d outputs; the dataset has %d classes (%s)",
              P, model(), out, classes.size(), String.join(", ", classes)));
    }
  }

  /** Keys that change how a run executes but not its numbers: a resumed run may change them. */
  private static final List<String> EXECUTION_KEYS =
      List.of(
          "dataset",
          "output",
          "overwrite",
          "backend",
          "threads",
          "workers",
          "prefetch",
          "log-every");

  /**
   * The settings a resumed run must share with its checkpoint: every {@code ramtrain.train.*} value
   * that changes the numbers, and the seed. {@code epochs} only counts where the learning rate
   * schedule depends on the run's length; otherwise a finished run may be extended.
   */
  public SortedMap<String, String> resumeSettings() {
    SortedMap<String, String> settings = new TreeMap<>();
    c.raw()
        .getConfig("ramtrain.train")
        .entrySet()
        .forEach(
            e -> {
              if (!EXECUTION_KEYS.contains(e.getKey())) {
                settings.put(P + e.getKey(), String.valueOf(e.getValue().unwrapped()));
              }
            });
    Schedule schedule = c.choice(P + "schedule", Schedule.class);
    if (schedule != Schedule.COSINE && schedule != Schedule.ONE_CYCLE) {
      settings.remove(P + "epochs");
    }
    settings.put("ramtrain.seed", Long.toString(seed()));
    return settings;
  }

  public int threads() {
    int t = c.integer(P + "threads");
    require(t >= 0, P + "threads", "must be >= 0 (0 = all cores)");
    return t == 0 ? Runtime.getRuntime().availableProcessors() : t;
  }

  public int batchSize() {
    return c.integer(P + "batch-size");
  }

  public int epochs() {
    return c.integer(P + "epochs");
  }

  public long seed() {
    return c.longValue("ramtrain.seed");
  }

  public LoaderOptions trainLoader() {
    return new LoaderOptions(
        batchSize(),
        c.integer(P + "workers"),
        c.integer(P + "prefetch"),
        seed(),
        true,
        c.choice(P + "remainder", LoaderOptions.Remainder.class),
        0,
        1,
        c.integer(P + "crop-padding"),
        c.bool(P + "flip"));
  }

  public LoaderOptions evalLoader() {
    return LoaderOptions.evaluation(batchSize(), c.integer(P + "workers"));
  }

  public Optimizer optimizer(Backend backend, long parameters) {
    float wd = (float) c.number(P + "weight-decay");
    return switch (c.choice(P + "optimizer", OptimizerKind.class)) {
      case ADAMW ->
          new AdamW(
              backend,
              parameters,
              (float) c.number(P + "beta1"),
              (float) c.number(P + "beta2"),
              (float) c.number(P + "eps"),
              wd);
      case SGD ->
          new Sgd(
              backend, parameters, (float) c.number(P + "momentum"), wd, c.bool(P + "nesterov"));
    };
  }

  /** The same optimizer on the host, for offloaded training. */
  public OffloadedLearner.OptimizerFactory hostOptimizer(Backend backend) {
    float wd = (float) c.number(P + "weight-decay");
    return switch (c.choice(P + "optimizer", OptimizerKind.class)) {
      case ADAMW ->
          (masters, grads, threads) ->
              new HostAdamW(
                  backend,
                  masters,
                  grads,
                  (float) c.number(P + "beta1"),
                  (float) c.number(P + "beta2"),
                  (float) c.number(P + "eps"),
                  wd,
                  threads);
      case SGD ->
          (masters, grads, threads) ->
              new HostSgd(
                  backend,
                  masters,
                  grads,
                  (float) c.number(P + "momentum"),
                  wd,
                  c.bool(P + "nesterov"),
                  threads);
    };
  }

  public LrSchedule schedule(int stepsPerEpoch) {
    double lr = c.number(P + "lr");
    long total = (long) stepsPerEpoch * epochs();
    return switch (c.choice(P + "schedule", Schedule.class)) {
      case CONSTANT -> LrSchedule.constant(lr);
      case STEP ->
          LrSchedule.stepDecay(
              lr, (long) c.integer(P + "step-epochs") * stepsPerEpoch, c.number(P + "step-gamma"));
      case COSINE ->
          LrSchedule.cosine(
              lr,
              (long) c.integer(P + "warmup-epochs") * stepsPerEpoch,
              total,
              c.number(P + "min-lr"));
      case ONE_CYCLE -> LrSchedule.oneCycle(lr, total, 0.3, 25, 1e4);
    };
  }

  /** Training options; {@code measured} fills mean/std when the settings leave them empty. */
  public TrainOptions options(float[] measuredMean, float[] measuredStd) {
    List<String> mean = c.strings(P + "mean");
    List<String> std = c.strings(P + "std");
    require(mean.size() == std.size(), P + "mean/std", "must have the same number of channels");
    return new TrainOptions(
        epochs(),
        (float) c.number(P + "label-smoothing"),
        (float) c.number(P + "clip-norm"),
        c.choice(P + "nan-policy", TrainOptions.NanPolicy.class),
        mean.isEmpty() ? measuredMean : floats(P + "mean", mean),
        std.isEmpty() ? measuredStd : floats(P + "std", std),
        c.integer(P + "log-every"));
  }

  public boolean normalizationGiven() {
    return !c.strings(P + "mean").isEmpty();
  }

  private static float[] floats(String key, List<String> values) {
    float[] out = new float[values.size()];
    for (int i = 0; i < out.length; i++) {
      try {
        out[i] = Float.parseFloat(values.get(i));
      } catch (NumberFormatException e) {
        throw new ConfigException(key + ": '" + values.get(i) + "' is not a number");
      }
    }
    return out;
  }
}
