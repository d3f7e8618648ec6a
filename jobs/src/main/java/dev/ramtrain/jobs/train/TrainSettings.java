package dev.ramtrain.jobs.train;

import static dev.ramtrain.jobs.config.RamtrainConfig.checked;
import static dev.ramtrain.jobs.config.RamtrainConfig.require;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.settings.Spelling;
import dev.ramtrain.trainer.BatchAugmentation;
import dev.ramtrain.trainer.BestEpoch;
import dev.ramtrain.trainer.LoopSpec;
import dev.ramtrain.trainer.Mixup;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.backend.CpuEngine;
import dev.ramtrain.trainer.backend.CudaSpec;
import dev.ramtrain.trainer.data.BadSamples;
import dev.ramtrain.trainer.data.CenterCrop;
import dev.ramtrain.trainer.data.InputResize;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.RandomResizedCrop;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.Precision;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.optim.AdamWSpec;
import dev.ramtrain.trainer.optim.OptimizerSpec;
import dev.ramtrain.trainer.optim.ParamGroups;
import dev.ramtrain.trainer.optim.ScheduleSpec;
import dev.ramtrain.trainer.optim.SgdSpec;
import dev.ramtrain.trainer.run.ModelChoice;
import dev.ramtrain.trainer.run.ResizeFilter;
import dev.ramtrain.trainer.run.RunData;
import dev.ramtrain.trainer.run.RunSpec;
import java.io.Serializable;
import java.util.List;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.function.Supplier;

/**
 * Reads {@code ramtrain.train.*}, {@code ramtrain.offload.*} and the seed once into a {@link
 * JobSpec}: every value is checked here, and a bad one is a usage error naming its key.
 */
public final class TrainSettings {
  private static final String P = "ramtrain.train.";
  private static final String O = "ramtrain.offload.";
  private static final String A = "ramtrain.train.augment.";

  public enum OptimizerKind {
    ADAMW,
    SGD
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
          "log-every",
          "checkpoint-every",
          "keep-checkpoints",
          // which checkpoint is called the best, and when a run stops early: not its numbers
          "best-metric",
          "early-stop-patience",
          "early-stop-min-delta");

  private TrainSettings() {}

  /**
   * {@code ramtrain.dist.*}: how many data-parallel ranks ({@link #AUTO_RANKS}: as the command
   * decides), how long one waits for another, the ZeRO stage (0: every rank keeps all optimizer
   * state; 1: each keeps its share), and whether each rank of {@code train} opens its own shards of
   * the dataset or all of them.
   */
  public record Dist(
      int ranks,
      java.time.Duration timeout,
      int zero,
      boolean ownShards,
      long failOnceAtStep,
      int devicesPerNode)
      implements Serializable {
    /** The rank count given, or {@code auto} where {@code ramtrain.dist.ranks = auto}. */
    public int ranksOr(int auto) {
      return ranks == AUTO_RANKS ? auto : ranks;
    }

    /** These settings with {@code n} ranks. */
    public Dist withRanks(int n) {
      return new Dist(n, timeout, zero, ownShards, failOnceAtStep, devicesPerNode);
    }

    /** These settings with {@code n} devices a node. */
    public Dist withDevicesPerNode(int n) {
      return new Dist(ranks, timeout, zero, ownShards, failOnceAtStep, n);
    }

    /** The devices a node given, or {@code auto} where {@code devices-per-node = auto}. */
    public int devicesPerNodeOr(int auto) {
      return devicesPerNode == AUTO_DEVICES ? auto : devicesPerNode;
    }
  }

  /** {@code ramtrain.dist.devices-per-node = auto}. */
  public static final int AUTO_DEVICES = 0;

  /** {@code ramtrain.dist.ranks = auto}. */
  public static final int AUTO_RANKS = 0;

  public static Dist dist(RamtrainConfig c) {
    String key = "ramtrain.dist.ranks";
    int ranks = c.string(key).strip().equalsIgnoreCase("auto") ? AUTO_RANKS : c.integer(key);
    require(ranks >= 1 || ranks == AUTO_RANKS, key, "must be auto or >= 1, got " + ranks);
    java.time.Duration timeout = c.duration("ramtrain.dist.timeout");
    require(!timeout.isNegative() && !timeout.isZero(), "ramtrain.dist.timeout", "must be > 0");
    int zero = c.integer("ramtrain.dist.zero");
    require(zero >= 0 && zero <= 2, "ramtrain.dist.zero", "must be 0, 1 or 2, got " + zero);
    String shards = c.string("ramtrain.dist.shards").strip();
    require(
        shards.equals("shared") || shards.equals("own"),
        "ramtrain.dist.shards",
        "must be shared or own, got '" + shards + "'");
    String devicesKey = "ramtrain.dist.devices-per-node";
    boolean autoDevices = c.string(devicesKey).strip().equalsIgnoreCase("auto");
    int devices = autoDevices ? AUTO_DEVICES : c.integer(devicesKey);
    require(autoDevices || devices >= 1, devicesKey, "must be auto or >= 1, got " + devices);
    return new Dist(
        ranks,
        timeout,
        zero,
        shards.equals("own"),
        c.longValue("ramtrain.dist.fail-once-at-step"),
        devices);
  }

  /** {@code ramtrain.train.batch-size}: the samples of a step, checked here for every reader. */
  public static int batchSize(RamtrainConfig c) {
    int batch = c.integer(P + "batch-size");
    require(batch >= 1, P + "batch-size", "must be >= 1, got " + batch);
    return batch;
  }

  /**
   * The layers {@code ramtrain.train.model} names at {@code ramtrain.train.precision} for inputs of
   * {@code shape}, built again each time they are asked for (plan measures them): a bad spec fails
   * here, naming the key.
   */
  public static Supplier<List<Layer>> modelLayers(RamtrainConfig c, ImageShape shape) {
    String spec = c.string(P + "model");
    Precision precision = c.choice(P + "precision", Precision.class);
    Supplier<List<Layer>> layers = () -> ModelChoice.parse(P + "model", spec, shape, precision);
    layers.get();
    return layers;
  }

  /** The HEIGHTxWIDTHxCHANNELS a plan sizes a model for; a usage error names {@code what}. */
  public static ImageShape planImage(String what, String text) {
    try {
      return ImageShape.parse(text);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(what + " " + e.getMessage());
    }
  }

  /** The run the settings describe. */
  public static JobSpec read(RamtrainConfig c) {
    require(c.integer(P + "epochs") >= 1, P + "epochs", "must be >= 1");
    require(c.integer(P + "accumulate") >= 1, P + "accumulate", "must be >= 1");
    require(c.number(P + "lr") > 0, P + "lr", "must be > 0");
    require(c.number(P + "clip-norm") >= 0, P + "clip-norm", "must be >= 0 (0: no clipping)");
    require(c.number(P + "weight-decay") >= 0, P + "weight-decay", "must be >= 0");
    double dropPath = c.number(P + "drop-path");
    require(dropPath >= 0 && dropPath < 1, P + "drop-path", "must be in [0, 1)");
    double ema = c.number(P + "ema");
    require(ema >= 0 && ema < 1, P + "ema", "must be in [0, 1) (0: no moving average)");
    double smoothing = c.number(P + "label-smoothing");
    require(smoothing >= 0 && smoothing < 1, P + "label-smoothing", "must be in [0, 1)");
    require(
        c.integer(P + "workers") >= 1 && c.integer(P + "prefetch") >= 1,
        P + "workers/prefetch",
        "must be >= 1");
    long seed = c.longValue("ramtrain.seed");
    ScheduleSpec schedule = schedule(c);
    RunSpec run =
        new RunSpec(
            data(c, seed),
            new ModelChoice(
                c.string(P + "model"),
                seed,
                c.choice(P + "precision", Precision.class),
                c.string(P + "weights"),
                (float) dropPath,
                (float) ema,
                c.bool(P + "ema-warmup")),
            checked(P + "optimizer", () -> optimizer(c)),
            schedule,
            loop(c).withBatchAugmentation(batchAugmentation(c, seed)),
            offload(c),
            backend(c));
    return new JobSpec(
        run,
        new JobSpec.Output(
            c.string(P + "output"),
            RunDirectory.Mode.of(false, c.bool(P + "overwrite")),
            false,
            c.integer(P + "checkpoint-every"),
            c.integer(P + "keep-checkpoints")),
        resumeSettings(c, schedule, seed),
        c.resolved());
  }

  /**
   * The backend {@code ramtrain.train.backend} and {@code .threads} ask for, with {@code
   * ramtrain.cuda.*} and {@code ramtrain.cpu.*}.
   */
  public static BackendSpec backend(RamtrainConfig c) {
    int t = c.integer(P + "threads");
    require(t >= 0, P + "threads", "must be >= 0 (0 = all cores)");
    long cpuMemory = c.bytes("ramtrain.cpu.memory");
    require(cpuMemory >= 0, "ramtrain.cpu.memory", "must be >= 0 (0 = the default)");
    return new BackendSpec(
        c.choice(P + "backend", BackendSpec.Kind.class),
        t == 0 ? Runtime.getRuntime().availableProcessors() : t,
        cuda(c),
        0,
        c.choice("ramtrain.cpu.engine", CpuEngine.class),
        cpuMemory);
  }

  /**
   * {@code spec} for {@code ranks} ranks in this process (local[N]): where ramtrain.train.threads
   * is left at 0 (every core), each rank takes its share of the cores instead of all of them, as
   * torchrun's one process a GPU with OMP_NUM_THREADS = cores / processes does.
   */
  public static JobSpec shareCores(JobSpec spec, RamtrainConfig c, int ranks) {
    if (ranks <= 1 || c.integer(P + "threads") != 0) {
      return spec;
    }
    int share = Math.max(1, Runtime.getRuntime().availableProcessors() / ranks);
    return spec.withRun(spec.run().withBackend(spec.run().backend().withThreads(share)));
  }

  /** {@code ramtrain.cuda.*}: who multiplies and convolves, TF32, where the libraries are. */
  public static CudaSpec cuda(RamtrainConfig c) {
    return new CudaSpec(
        c.choice("ramtrain.cuda.gemm", CudaSpec.GemmChoice.class),
        c.choice("ramtrain.cuda.conv", CudaSpec.ConvChoice.class),
        c.choice("ramtrain.cuda.tf32", CudaSpec.Tf32.class),
        c.strings("ramtrain.cuda.library-path"));
  }

  /** {@code ramtrain.offload.*}. */
  public static OffloadSpec offload(RamtrainConfig c) {
    require(c.integer(O + "prefetch-depth") >= 1, O + "prefetch-depth", "must be >= 1");
    require(c.integer(O + "host-threads") >= 0, O + "host-threads", "must be >= 0 (0 = all cores)");
    require(c.bytes(O + "budget") >= 0, O + "budget", "must be >= 0 (0 = device memory - margin)");
    require(
        c.integer(O + "delayed-update-warmup-steps") >= 0,
        O + "delayed-update-warmup-steps",
        "must be >= 0");
    int hostThreads = c.integer(O + "host-threads");
    return checked( // the other limits were checked above, naming their keys
        O + "margin",
        () ->
            new OffloadSpec(
                c.choice(O + "mode", OffloadSpec.Mode.class),
                c.bytes(O + "budget"),
                c.bytes(O + "margin"),
                c.integer(O + "prefetch-depth"),
                c.bool(O + "bf16-weights"),
                c.bool(O + "delayed-update"),
                c.integer(O + "delayed-update-warmup-steps"),
                hostThreads == 0 ? Runtime.getRuntime().availableProcessors() : hostThreads,
                c.choice(O + "clip-update", OffloadSpec.ClipUpdate.class),
                c.choice(O + "optimizer-state", OffloadSpec.OptimizerState.class)));
  }

  private static RunData data(RamtrainConfig c, long seed) {
    int batch = batchSize(c);
    int workers = c.integer(P + "workers");
    boolean resizedCrop = c.choice(A + "mode", AugmentMode.class) == AugmentMode.RRC;
    require(c.integer(A + "height") >= 0, A + "height", "must be >= 0 (0: the stored height)");
    require(c.integer(A + "width") >= 0, A + "width", "must be >= 0 (0: the stored width)");
    require(
        resizedCrop || c.integer(A + "height") == 0,
        A + "height",
        "sets the crop's output: it needs ramtrain.train.augment.mode = rrc");
    require(
        resizedCrop || c.integer(A + "width") == 0,
        A + "width",
        "sets the crop's output: it needs ramtrain.train.augment.mode = rrc");
    LoaderSpec.SampleAugmentation augmentation =
        checked(
            P + "crop-padding",
            () ->
                new LoaderSpec.SampleAugmentation(
                    c.integer(P + "crop-padding"),
                    c.bool(P + "flip"),
                    resizedCrop ? randomResizedCrop(c) : null));
    LoaderSpec train =
        LoaderSpec.training(
                batch,
                workers,
                c.integer(P + "prefetch"),
                seed,
                c.choice(P + "remainder", LoaderSpec.Remainder.class),
                augmentation)
            .withBatchesPerStep(c.integer(P + "accumulate"));
    InputResize evalResize =
        resizedCrop
            ? checked(
                A + "crop-pct",
                () ->
                    new CenterCrop(
                        c.integer(A + "height"), c.integer(A + "width"), c.number(A + "crop-pct")))
            : null;
    return new RunData(
        c.string(P + "dataset"),
        train,
        LoaderSpec.evaluation(batch, workers, evalResize),
        c.choice(A + "filter", ResizeFilter.class),
        c.choice(P + "bad-sample", BadSamples.class),
        shardWindow(c));
  }

  /** {@code ramtrain.train.shard-window}: shards a loader reads at a time, 0 for all at once. */
  private static int shardWindow(RamtrainConfig c) {
    int window = c.integer(P + "shard-window");
    RamtrainConfig.require(window >= 0, P + "shard-window", "must be >= 0 (0: every shard open)");
    return window;
  }

  /** Load-time augmentation beyond crop-padding and flip ({@code ramtrain.train.augment.mode}). */
  enum AugmentMode {
    NONE,
    RRC
  }

  /** {@code ramtrain.train.augment.*}: torchvision's RandomResizedCrop to the model's input. */
  private static RandomResizedCrop randomResizedCrop(RamtrainConfig c) {
    double[] scale = pair(c, A + "scale");
    double[] ratio = pair(c, A + "ratio");
    for (String key : List.of("scale", "ratio")) {
      double[] range = key.equals("scale") ? scale : ratio;
      require(
          range[0] > 0 && range[0] <= range[1] && Double.isFinite(range[1]),
          A + key,
          "needs 0 < min <= max, got [" + range[0] + ", " + range[1] + "]");
    }
    return checked( // the limits were checked above, naming their keys
        A + "mode",
        () ->
            new RandomResizedCrop(
                c.integer(A + "height"),
                c.integer(A + "width"),
                scale[0],
                scale[1],
                ratio[0],
                ratio[1]));
  }

  /** A two-number list, as torchvision's (min, max) tuples. */
  private static double[] pair(RamtrainConfig c, String key) {
    List<String> values = c.strings(key);
    require(values.size() == 2, key, "must be [min, max], got " + values);
    try {
      return new double[] {Double.parseDouble(values.get(0)), Double.parseDouble(values.get(1))};
    } catch (NumberFormatException e) {
      throw new ConfigException(key + " = " + values + ": not numbers");
    }
  }

  private static OptimizerSpec optimizer(RamtrainConfig c) {
    float wd = (float) c.number(P + "weight-decay");
    ParamGroups.Rules groups = checked(P + "layer-decay", () -> groups(c));
    return switch (c.choice(P + "optimizer", OptimizerKind.class)) {
      case ADAMW ->
          new AdamWSpec(
              (float) c.number(P + "beta1"),
              (float) c.number(P + "beta2"),
              (float) c.number(P + "eps"),
              wd,
              groups);
      case SGD -> new SgdSpec((float) c.number(P + "momentum"), wd, c.bool(P + "nesterov"), groups);
    };
  }

  /** The weight-decay groups, the layer decay and the frozen parameters (timm's groups). */
  private static ParamGroups.Rules groups(RamtrainConfig c) {
    String freeze = c.string(P + "freeze");
    try {
      java.util.regex.Pattern.compile(freeze);
    } catch (java.util.regex.PatternSyntaxException e) {
      throw new ConfigException(
          P + "freeze = '" + freeze + "' is not a regular expression: " + e.getDescription());
    }
    return new ParamGroups.Rules(
        (float) c.number(P + "layer-decay"),
        c.choice(P + "weight-decay-groups", DecayGroups.class) == DecayGroups.TIMM,
        freeze);
  }

  /** Which parameters weight decay applies to ({@code ramtrain.train.weight-decay-groups}). */
  enum DecayGroups {
    TIMM,
    ALL
  }

  private static ScheduleSpec schedule(RamtrainConfig c) {
    return checked(
        P + "schedule",
        () ->
            new ScheduleSpec(
                c.choice(P + "schedule", ScheduleSpec.Kind.class),
                c.number(P + "lr"),
                c.integer(P + "step-epochs"),
                c.number(P + "step-gamma"),
                c.integer(P + "warmup-epochs"),
                c.number(P + "min-lr")));
  }

  private static LoopSpec loop(RamtrainConfig c) {
    // Pretrained weights expect the normalization they were trained with: timm's and
    // torchvision's ImageNet figures, unless set.
    boolean imagenet =
        !c.string(P + "weights").isEmpty()
            && c.strings(P + "mean").isEmpty()
            && c.strings(P + "std").isEmpty();
    List<String> mean = imagenet ? List.of("0.485", "0.456", "0.406") : c.strings(P + "mean");
    List<String> std = imagenet ? List.of("0.229", "0.224", "0.225") : c.strings(P + "std");
    require(mean.size() == std.size(), P + "mean/std", "must have the same number of channels");
    return checked( // the other limits were checked above, naming their keys
        P + "log-every",
        () ->
            new LoopSpec(
                c.integer(P + "epochs"),
                (float) c.number(P + "label-smoothing"),
                (float) c.number(P + "clip-norm"),
                c.choice(P + "nan-policy", LoopSpec.NanPolicy.class),
                floats(P + "mean", mean),
                floats(P + "std", std),
                c.integer(P + "log-every"),
                c.integer(P + "accumulate"),
                new BestEpoch.Rule(
                    c.choice(P + "best-metric", BestEpoch.Metric.class),
                    c.integer(P + "early-stop-patience"),
                    c.number(P + "early-stop-min-delta"))));
  }

  /**
   * {@code ramtrain.train.color-jitter} and {@code mixup, cutmix, mixup-prob, mixup-switch-prob}:
   * timm's colour jitter and Mixup, on the device.
   */
  private static BatchAugmentation batchAugmentation(RamtrainConfig c, long seed) {
    Mixup mixup =
        checked(
            P + "mixup",
            () ->
                new Mixup(
                    c.number(P + "mixup"),
                    c.number(P + "cutmix"),
                    c.number(P + "mixup-prob"),
                    c.number(P + "mixup-switch-prob")));
    return checked(
        P + "color-jitter",
        () -> new BatchAugmentation((float) c.number(P + "color-jitter"), mixup, seed));
  }

  /**
   * The settings a resumed run must share with its checkpoint: every {@code ramtrain.train.*} value
   * that changes the numbers, the seed, and {@code ramtrain.cuda.tf32} (TF32 rounds fp32 operands:
   * a run resumed with another setting would not repeat its numbers). {@code epochs} only counts
   * where the learning rate schedule depends on the run's length; otherwise a finished run may be
   * extended.
   */
  private static SortedMap<String, String> resumeSettings(
      RamtrainConfig c, ScheduleSpec schedule, long seed) {
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
    if (!schedule.dependsOnRunLength()) {
      settings.remove(P + "epochs");
    }
    settings.put("ramtrain.seed", Long.toString(seed));
    settings.put(
        "ramtrain.cuda.tf32", Spelling.of(c.choice("ramtrain.cuda.tf32", CudaSpec.Tf32.class)));
    return settings;
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
