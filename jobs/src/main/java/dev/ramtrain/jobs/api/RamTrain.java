package dev.ramtrain.jobs.api;

import dev.ramtrain.etl.dataset.VersionLease;
import dev.ramtrain.etl.spark.InMemoryShards;
import dev.ramtrain.etl.spark.PreprocessJob;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.config.DeviceProfiles;
import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.jobs.train.CheckpointEvaluation;
import dev.ramtrain.jobs.train.DistributedTraining;
import dev.ramtrain.jobs.train.ImageClassifier;
import dev.ramtrain.jobs.train.ImageFiles;
import dev.ramtrain.jobs.train.InMemoryTraining;
import dev.ramtrain.jobs.train.JobSpec;
import dev.ramtrain.jobs.train.PlanSettings;
import dev.ramtrain.jobs.train.TrainSettings;
import dev.ramtrain.jobs.train.TrainedCheckpoint;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.engines.Backends;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.offload.DeviceProfile;
import dev.ramtrain.trainer.offload.HostProfile;
import dev.ramtrain.trainer.offload.HostUpdateTiming;
import dev.ramtrain.trainer.offload.LayerCost;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.offload.PlacementPlan;
import dev.ramtrain.trainer.run.Placement;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * ramtrain from code: a Zeppelin note, spark-shell, a Scala or Java program. What the CLI's
 * commands do, on a Spark session the caller owns (never stopped here), with the same validated
 * settings: conf/ramtrain-defaults.conf, then the session's {@code spark.ramtrain.*} properties (a
 * Zeppelin Spark interpreter's properties, spark-submit's --conf), then what {@link #set} gave.
 * Results come back as values and Spark DataFrames, ready for {@code z.show} and {@code %sql}.
 *
 * <pre>{@code
 * val rt = RamTrain.on(spark).set("ramtrain.train.epochs", 3)
 * val ds = rt.preprocess("/data/pets", "/datasets/pets")
 * z.show(ds.classBalance)
 * val run = rt.train("/datasets/pets", "/runs/pets-1")   // returns at once; trains meanwhile
 * run.epochs.createOrReplaceTempView("ramtrain_epochs")   // %sql select * from ramtrain_epochs
 * run.await()
 * }</pre>
 */
public final class RamTrain {
  private final SparkSession spark;
  private final Map<String, String> overrides;

  private RamTrain(SparkSession spark, Map<String, String> overrides) {
    this.spark = spark;
    this.overrides = overrides;
  }

  /** ramtrain on {@code spark}, with the settings its {@code spark.ramtrain.*} properties give. */
  public static RamTrain on(SparkSession spark) {
    RamTrain rt = new RamTrain(spark, Map.of());
    RamtrainConfig c = rt.config(); // an unknown spark.ramtrain.* property fails here, naming it
    for (String key : rt.sparkConf().keySet()) {
      if (key.startsWith("spark.ramtrain.")) {
        c.requireKindOfDefault(key.substring("spark.".length())); // and one of the wrong kind
      }
    }
    return rt;
  }

  /**
   * A copy with the full key {@code key} ({@code ramtrain.train.epochs}) set to {@code value}; an
   * unknown key or a value of the wrong kind fails here, naming the key.
   */
  public RamTrain set(String key, Object value) {
    Map<String, String> more = new LinkedHashMap<>(overrides);
    more.put(key, String.valueOf(value));
    RamTrain copy = new RamTrain(spark, Map.copyOf(more));
    copy.config().requireKindOfDefault(key);
    return copy;
  }

  /** The settings as resolved: defaults, then spark.ramtrain.* properties, then {@link #set}. */
  public RamtrainConfig config() {
    return RamtrainConfig.load(null, sparkConf(), overrides);
  }

  private Map<String, String> sparkConf() {
    return scala.jdk.javaapi.CollectionConverters.asJava(spark.conf().getAll());
  }

  /** One setting's resolved value, as text. */
  public String setting(String key) {
    return config().resolved().getOrDefault(key, null);
  }

  /**
   * Writes the generated shapes images (ramtrain.generate.*: classes, images per class, size) into
   * {@code dir}, a new or empty directory: something to try ramtrain on. Returns the image count.
   */
  public int generateShapes(String dir) throws IOException {
    Path root = Path.of(dir);
    return EtlSettings.syntheticImages(config(), root).writeTo(root);
  }

  /**
   * Preprocesses {@code input} (an image folder, Parquet table, idx or CIFAR files: ramtrain.etl.*)
   * into a dataset committed to {@code output}; returns it, inspected.
   */
  public Inspection preprocess(String input, String output) throws IOException {
    RamtrainConfig c =
        set("ramtrain.source.path", input)
            .set("ramtrain.etl.output", output)
            .set("ramtrain.etl.mode", "offline")
            .config();
    var source = EtlSettings.source(c, spark.sparkContext().hadoopConfiguration());
    new PreprocessJob(spark, source, EtlSettings.preprocessOptions(c)).run();
    return inspect(output);
  }

  /**
   * Preprocesses {@code input} into shards cached on the executors (as {@code pipeline} does), to
   * train on with {@link #train(InMemoryShards, String)}; close them to free the executors' memory.
   */
  public InMemoryShards preprocessInMemory(String input) throws IOException {
    RamtrainConfig c =
        set("ramtrain.source.path", input).set("ramtrain.etl.mode", "memory").config();
    var source = EtlSettings.source(c, spark.sparkContext().hadoopConfiguration());
    return new PreprocessJob(spark, source, EtlSettings.preprocessOptions(c)).run().inMemory();
  }

  /** A committed dataset's summary, class balance and samples. */
  public Inspection inspect(String dataset) throws IOException {
    return Inspection.of(spark, dataset);
  }

  /**
   * Where {@code model}'s layers would go at {@code batchSize} on every device profile under
   * ramtrain.devices (and this machine, "measured"): one row per device, what fits resident and
   * what must be offloaded, with memory, bytes copied per step and predicted step times. {@code
   * image}: HEIGHTxWIDTHxCHANNELS, for cnn and resnet specs.
   */
  public Dataset<Row> plan(String model, int batchSize, String image) {
    RamtrainConfig c =
        set("ramtrain.train.model", model).set("ramtrain.train.batch-size", batchSize).config();
    OffloadSpec offload = TrainSettings.offload(c);
    int batch = TrainSettings.batchSize(c);
    Supplier<List<Layer>> layers =
        TrainSettings.modelLayers(c, TrainSettings.planImage("plan image", image));
    StructType schema =
        new StructType()
            .add("device", DataTypes.StringType)
            .add("memory_gib", DataTypes.DoubleType)
            .add("placement", DataTypes.StringType)
            .add("device_mib", DataTypes.DoubleType)
            .add("pinned_host_mib", DataTypes.DoubleType)
            .add("copied_mib_per_step", DataTypes.DoubleType)
            .add("step_ms", DataTypes.DoubleType)
            .add("min_batch_hiding_copies", DataTypes.IntegerType);
    List<Row> rows = new ArrayList<>();
    try (Backend backend = Backends.open(TrainSettings.backend(c))) {
      List<LayerCost> costs = LayerCost.measure(layers, backend);
      HostProfile host = PlanSettings.host(c, backend, offload);
      List<DeviceProfile> profiles = new ArrayList<>();
      for (String name : DeviceProfiles.names(c)) {
        profiles.add(DeviceProfiles.named(c, name));
      }
      for (DeviceProfile profile : profiles) {
        long budget = Placement.budget(offload, profile.memoryBytes());
        try {
          HostUpdateTiming timing =
              PlanSettings.timing(c, offload, false, profile.sharesHostCores());
          PlacementPlan p =
              Placement.plan(
                  offload, costs, batch, budget, profile, PlacementPlan.Zero.NONE, host, timing);
          boolean resident = p.mode() == PlacementPlan.Mode.RESIDENT;
          rows.add(
              RowFactory.create(
                  profile.name(),
                  profile.memoryBytes() / (double) (1L << 30),
                  resident
                      ? "resident"
                      : p.streamed().isEmpty()
                          ? "offloaded (optimizer on the host)"
                          : "offloaded, " + p.streamed().size() + " layers streamed",
                  p.deviceBytes() / (double) (1 << 20),
                  p.hostPinnedBytes() / (double) (1 << 20),
                  p.copiedBytesPerStep() / (double) (1 << 20),
                  1e3 * (resident ? p.residentStepSeconds() : p.streamedStepSeconds()),
                  p.minBatchToHideCopies()));
        } catch (ConfigException doesNotFit) {
          rows.add(
              RowFactory.create(
                  profile.name(),
                  profile.memoryBytes() / (double) (1L << 30),
                  "does not fit: " + doesNotFit.getMessage(),
                  null,
                  null,
                  null,
                  null,
                  null));
        }
      }
    }
    return spark.createDataFrame(rows, schema);
  }

  /**
   * Starts training on the committed dataset {@code dataset} into the run directory {@code output}
   * (ramtrain.train.*; ramtrain.dist.ranks trainer tasks in a Spark barrier stage, one by default)
   * and returns at once: the handle shows the metrics while it trains.
   */
  public Training train(String dataset, String output) {
    return train(dataset, output, false);
  }

  /**
   * Starts the run in {@code output} again from its latest checkpoint (as {@code train --resume}:
   * refused, naming what changed, when the settings or data differ from the checkpoint's).
   */
  public Training resume(String dataset, String output) {
    return train(dataset, output, true);
  }

  private Training train(String dataset, String output, boolean resume) {
    RamtrainConfig c =
        set("ramtrain.train.dataset", dataset).set("ramtrain.train.output", output).config();
    JobSpec settings = resume ? TrainSettings.read(c).resuming(false) : TrainSettings.read(c);
    TrainSettings.Dist dist = TrainSettings.dist(c);
    TrainSettings.Dist ranks = dist.withRanks(dist.ranksOr(1));
    VersionLease lease; // the version read, held until the run ends
    try {
      lease =
          VersionLease.take(dataset, spark.sparkContext().hadoopConfiguration(), "train " + output);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    try {
      Manifest manifest = lease.dataset().manifest();
      // Checked here, before the run starts: a model that does not fit the data is a usage error.
      JobSpec spec = settings.forDataset(manifest);
      return Training.start(
          spark,
          spec,
          manifest.classes(),
          () -> {
            try (lease) {
              return DistributedTraining.run(spark, spec, ranks, manifest);
            }
          });
    } catch (RuntimeException e) {
      lease.close();
      throw e;
    }
  }

  /** Starts training on in-memory shards (one rank per executor holding them, by default). */
  public Training train(InMemoryShards shards, String output) {
    RamtrainConfig c = set("ramtrain.train.output", output).config();
    JobSpec spec = TrainSettings.read(c).forDataset(shards.manifest());
    TrainSettings.Dist dist = TrainSettings.dist(c);
    return Training.start(
        spark,
        spec,
        shards.manifest().classes(),
        () -> InMemoryTraining.run(spec, dist, shards).eval());
  }

  /** A checkpoint (or a run directory's latest) evaluated on the val split of {@code dataset}. */
  public Evaluated evaluate(String checkpoint, String dataset) throws IOException {
    return evaluate(checkpoint, dataset, "val");
  }

  /** A checkpoint (or a run directory's latest) evaluated on {@code split} of {@code dataset}. */
  public Evaluated evaluate(String checkpoint, String dataset, String split) throws IOException {
    JobSpec s = TrainSettings.read(set("ramtrain.train.dataset", dataset).config());
    TrainedCheckpoint trained = TrainedCheckpoint.open(Path.of(checkpoint));
    EvalResult eval =
        CheckpointEvaluation.run(
            s, trained, dataset, split, spark.sparkContext().hadoopConfiguration());
    return new Evaluated(spark, split, eval, trained.classes());
  }

  /**
   * The class of each image file (directories are searched), as the checkpoint's training saw
   * images: rows of path, prediction, probability, and the error of a file that could not be read.
   */
  public Dataset<Row> predict(String checkpoint, String... images) throws IOException {
    if (images.length == 0) {
      throw new ConfigException("predict: no images given");
    }
    RamtrainConfig c = config();
    TrainedCheckpoint trained = TrainedCheckpoint.open(Path.of(checkpoint));
    List<Path> files = ImageFiles.under(java.util.Arrays.stream(images).map(Path::of).toList());
    StructType schema =
        new StructType()
            .add("path", DataTypes.StringType)
            .add("prediction", DataTypes.StringType)
            .add("probability", DataTypes.DoubleType)
            .add("error", DataTypes.StringType);
    List<Row> rows = new ArrayList<>();
    try (ImageClassifier classifier =
        ImageClassifier.open(
            trained,
            TrainSettings.backend(c),
            EtlSettings.imageLimits(c),
            64,
            TrainSettings.offload(c))) {
      for (ImageClassifier.Prediction p : classifier.classify(files)) {
        rows.add(
            RowFactory.create(
                p.path(),
                p.label(),
                p.error() == null ? (double) p.probability() : null,
                p.error()));
      }
    }
    return spark.createDataFrame(rows, schema);
  }
}
