package dev.ramtrain.etl.spark;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.etl.dataset.DatasetCommitter;
import dev.ramtrain.etl.dataset.DatasetLayout;
import dev.ramtrain.etl.dataset.HadoopConf;
import dev.ramtrain.etl.dataset.StagedShards;
import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageProcessor;
import dev.ramtrain.etl.source.ImageSource;
import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ids.SampleIds;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.Partitioner;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.storage.StorageLevel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Tuple2;

/**
 * Raw dataset ▶ Arrow shards, on Spark executors. One code path for both outputs: shards are staged
 * and committed to a dataset directory (offline), or kept as cached blocks (memory).
 *
 * <pre>
 * source ─▶ (slot, sample): split by key hash, shard and order by (seed, id)
 *        ─▶ one partition per shard, sorted by order: placed by the driver for listed files
 *           (references, no shuffle), shuffled for records inside files
 *        ─▶ per partition: read ▶ decode ▶ resize ▶ augment ▶ Arrow shard
 *        ─▶ driver: reject check, manifest, atomic commit
 * </pre>
 */
public final class PreprocessJob {
  private static final Logger LOG = LoggerFactory.getLogger(PreprocessJob.class);
  public static final String CREATED_BY = "ramtrain 0.1.0";
  private static final String JOB_GROUP = "ramtrain-preprocess";

  private final SparkSession spark;
  private final ImageSource source;
  private final PreprocessSpec options;

  public PreprocessJob(SparkSession spark, ImageSource source, PreprocessSpec options) {
    this.spark = spark;
    this.source = source;
    this.options = options;
  }

  public PreprocessResult run() throws IOException {
    long start = System.nanoTime();
    var sc = spark.sparkContext();
    sc.setJobGroup(JOB_GROUP, "ramtrain preprocess " + source.path(), false);
    // Closing the committer without a commit removes the run's staging, whatever failed: an
    // I/O error, a bad input, or a SparkException (which Java cannot even name in a catch here).
    try (DatasetCommitter committer =
            options.output() == PreprocessSpec.Output.OFFLINE
                ? DatasetCommitter.begin(
                    options.outputPath(),
                    source.path(),
                    options.overwrite(),
                    sc.hadoopConfiguration())
                : null;
        StageBreakdown stages = StageBreakdown.listen(sc, JOB_GROUP)) {
      return run(committer, stages, start);
    } finally {
      sc.clearJobGroup();
    }
  }

  private PreprocessResult run(DatasetCommitter committer, StageBreakdown stages, long start)
      throws IOException {
    var sc = spark.sparkContext();
    if (sc.isLocal()) {
      // The tasks run in this JVM: load the decoder's natives while the driver lists the inputs,
      // instead of in the first task on every core, which would wait for one another.
      Thread loader = new Thread(options.decoder()::loadNatives, "ramtrain-load-decoder");
      loader.setDaemon(true);
      loader.start();
    }
    sc.setJobDescription("ramtrain preprocess: list classes of " + source.path());
    List<String> classes = source.classes(spark);
    if (classes.isEmpty()) {
      throw new PreprocessException("no classes found in " + source.path());
    }
    sc.setJobDescription("ramtrain preprocess: count inputs of " + source.path());
    Map<String, Long> inputsBySplit = source.countBySplit(spark, options.valFraction());
    long inputs = inputsBySplit.values().stream().mapToLong(Long::longValue).sum();
    if (inputs == 0) {
      throw new PreprocessException("no input images in " + source.path());
    }
    ShardSchema schema =
        new ShardSchema(
            options.transform().shape(),
            classes,
            options.storage().encoded() ? ShardSchema.Storage.ENCODED : ShardSchema.Storage.PIXELS);
    Augmentation augmentation = options.transform().augmentation();
    ShardPlan plan =
        ShardPlan.of(
            inputsBySplit, options, augmentation.outputsPerSample(), schema.shape().bytes());
    LOG.info(
        "preprocessing {} inputs from {} into {} train + {} val shards of {} images",
        inputs,
        source.path(),
        plan.trainShards(),
        plan.valShards(),
        schema.shape());

    ShardCounters counters = ShardCounters.register(sc);
    ImageProcessor processor =
        new ImageProcessor(
                options.transform(), options.decoder(), options.maxPixels(), options.seed())
            .withExifOrientation(options.exifOrientation());
    StagedShards staging = committer == null ? null : committer.staging(options.directIo());
    // One configuration object for reading and staging: Java serialization writes it once per task.
    HadoopConf hadoop = staging == null ? new HadoopConf(sc.hadoopConfiguration()) : staging.conf();
    ShardTask task =
        new ShardTask(plan, schema, processor, source, staging, options, hadoop, counters);
    JavaRDD<ShardResult> shards = placed(classes, plan).mapPartitionsWithIndex(task::run, true);
    if (committer == null) {
      shards = shards.persist(StorageLevel.MEMORY_AND_DISK());
    }
    boolean kept = false;
    try {
      sc.setJobDescription("ramtrain preprocess: decode, resize, augment and write shards");
      List<ShardResult> results;
      long jobStart = System.nanoTime();
      try (ConsoleProgress progress =
          ConsoleProgress.start(
              "preprocess", inputs, counters.files(), counters.bytes(), sc, start)) {
        results = new ArrayList<>(shards.map(ShardResult::withoutBytes).collect());
      }
      long jobEnd = System.nanoTime();
      results.sort(Comparator.comparing(ShardResult::split).thenComparingInt(ShardResult::shard));
      List<Reject> rejects = new ArrayList<>();
      results.forEach(r -> rejects.addAll(r.rejects()));
      long seen = results.stream().mapToLong(ShardResult::inputs).sum();
      Manifest manifest = manifest(schema, results, rejects, seen);
      checkRejectRatio(rejects, seen);

      if (committer != null) {
        manifest = committer.commit(manifest, rejectsJsonLines(rejects));
        LOG.info("committed dataset {}", options.outputPath());
      }
      PreprocessTiming timing =
          new PreprocessTiming(
              (jobStart - start) / 1e9,
              (jobEnd - jobStart) / 1e9,
              (System.nanoTime() - jobEnd) / 1e9,
              stages.stages(1),
              counters.readNanos().value() / 1e9,
              counters.decodeNanos().value() / 1e9,
              counters.writeNanos().value() / 1e9);
      LOG.debug("preprocess {}", timing.describe());
      if (committer != null) {
        return new PreprocessResult(manifest, rejects, null, timing);
      }
      kept = true;
      return new PreprocessResult(
          manifest, rejects, new InMemoryShards(manifest, shards, results), timing);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new PreprocessException("interrupted while preprocessing " + source.path());
    } finally {
      if (committer == null && !kept) {
        shards.unpersist(false);
      }
    }
  }

  /**
   * The inputs, one partition per shard, each sorted by slot. A source the driver has listed (a
   * folder walk) is placed here, in one stage with no shuffle (saving a stage's scheduling and a
   * shuffle on every run); records only executors can read are slotted and shuffled. Both order by
   * the same {@link ShardSlot}, so the shards are the same bytes either way.
   */
  private JavaRDD<Tuple2<ShardSlot, RawSample>> placed(List<String> classes, ShardPlan plan)
      throws IOException {
    List<RawSample> listed = source.listedOnDriver(spark, classes);
    if (listed == null) {
      return source
          .samples(spark, classes)
          .flatMapToPair(sample -> slot(plan, sample))
          .repartitionAndSortWithinPartitions(new ShardPartitioner(plan.partitions()))
          .rdd()
          .toJavaRDD();
    }
    List<List<Tuple2<ShardSlot, RawSample>>> byShard = new ArrayList<>();
    for (int p = 0; p < plan.partitions(); p++) {
      byShard.add(new ArrayList<>());
    }
    for (RawSample sample : listed) {
      slot(plan, sample).forEachRemaining(t -> byShard.get(t._1().partition()).add(t));
    }
    byShard.forEach(shard -> shard.sort(Comparator.comparing(Tuple2::_1)));
    // One element per slice when there are as many slices as elements: partition p is shard p.
    return new JavaSparkContext(spark.sparkContext())
        .parallelize(byShard, plan.partitions())
        .flatMap(List::iterator);
  }

  private static Iterator<Tuple2<ShardSlot, RawSample>> slot(ShardPlan plan, RawSample sample) {
    long id = SampleIds.of(sample.key());
    ShardSlot slot = plan.slot(plan.split(sample.split(), id), id);
    return slot == null
        ? Collections.emptyIterator()
        : List.of(new Tuple2<>(slot, sample)).iterator();
  }

  private void checkRejectRatio(List<Reject> rejects, long inputs) {
    double ratio = inputs == 0 ? 0 : (double) rejects.size() / inputs;
    if (ratio > options.maxRejectFraction()) {
      StringBuilder message =
          new StringBuilder(
              String.format(
                  "%d of %d inputs (%.1f%%) were rejected, more than ramtrain.etl.max-reject-fraction=%s;"
                      + " nothing was written. First rejects:",
                  rejects.size(), inputs, 100 * ratio, options.maxRejectFraction()));
      rejects.stream()
          .limit(10)
          .forEach(
              r ->
                  message
                      .append("\n  ")
                      .append(r.path())
                      .append(": ")
                      .append(r.reason())
                      .append(" (")
                      .append(r.detail())
                      .append(')'));
      throw new PreprocessException(message.toString());
    }
  }

  private Manifest manifest(
      ShardSchema schema, List<ShardResult> results, List<Reject> rejects, long inputs) {
    Map<String, Manifest.Split> splits = new TreeMap<>();
    for (String split : List.of(Manifest.TRAIN, Manifest.VAL)) {
      List<Manifest.Shard> entries = new ArrayList<>();
      long[] counts = new long[schema.classes().size()];
      long rows = 0;
      long size = 0;
      for (ShardResult r : results) {
        if (r.split().equals(split) && r.stats().rows() > 0) {
          entries.add(Manifest.Shard.of(DatasetLayout.shardFile(split, r.shard()), r.stats()));
          rows += r.stats().rows();
          size += r.stats().bytes();
          for (int c = 0; c < counts.length; c++) {
            counts[c] += r.stats().classCounts().get(c);
          }
        }
      }
      List<Long> classCounts = new ArrayList<>();
      for (long c : counts) {
        classCounts.add(c);
      }
      splits.put(split, new Manifest.Split(rows, size, classCounts, entries));
    }
    Map<String, Long> byReason = new TreeMap<>();
    rejects.forEach(r -> byReason.merge(r.reason().name(), 1L, Long::sum));
    return new Manifest(
        Manifest.FORMAT,
        Manifest.VERSION,
        CREATED_BY,
        Manifest.Image.of(schema.shape(), options.storage().modeName()),
        schema.classes(),
        splits,
        new Manifest.Source(source.type(), source.path(), source.options()),
        transforms(),
        options.seed(),
        new Manifest.Rejects(
            rejects.size(),
            inputs,
            byReason,
            options.output() == PreprocessSpec.Output.OFFLINE ? DatasetLayout.REJECTS : null));
  }

  private Map<String, Object> transforms() {
    Map<String, Object> t = new LinkedHashMap<>();
    var transform = options.transform();
    t.put("resize", transform.mode().name().toLowerCase().replace('_', '-'));
    // How pixels are resampled (Resample): a dataset says which filter made it.
    t.put("resample", "gaussian-bilinear below 2x, area at 2x or more and at integer ratios");
    t.put("color", transform.shape().channels() == 1 ? "grayscale" : "rgb");
    t.put("decoder", options.decoder().name().toLowerCase());
    t.put("exif-orientation", options.exifOrientation() ? "apply" : "ignore");
    if (options.storage().encoded()) {
      t.put("jpeg-quality", options.storage().quality());
    }
    // What was done, not what was set: a source's own val split, or the fraction taken; no
    // augmentation settings when no augmented copy was made.
    if (source.ownSplits()) {
      t.put("val", "the source's own split");
    } else {
      t.put("val-fraction", options.valFraction());
    }
    Augmentation a = transform.augmentation();
    if (a.copies() == 0) {
      return t;
    }
    Map<String, Object> augment = new LinkedHashMap<>();
    augment.put("copies", a.copies());
    augment.put("keep-original", a.keepOriginal());
    augment.put("scale", List.of(a.scaleMin(), a.scaleMax()));
    augment.put("ratio", List.of(a.ratioMin(), a.ratioMax()));
    augment.put("flip-probability", a.flipProbability());
    augment.put("rotation-degrees", a.rotationDegrees());
    augment.put("brightness", a.brightness());
    augment.put("contrast", a.contrast());
    augment.put("saturation", a.saturation());
    t.put("augment", augment);
    return t;
  }

  private static byte[] rejectsJsonLines(List<Reject> rejects) throws IOException {
    ObjectMapper json = new ObjectMapper();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (Reject r : rejects) {
      Map<String, String> line = new LinkedHashMap<>();
      line.put("path", r.path());
      line.put("reason", r.reason().name());
      line.put("detail", r.detail());
      out.write(json.writeValueAsBytes(line));
      out.write('\n');
    }
    return out.toString(StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
  }

  /** Partition p holds exactly the samples of shard p. */
  private static final class ShardPartitioner extends Partitioner {
    private final int partitions;

    ShardPartitioner(int partitions) {
      this.partitions = partitions;
    }

    @Override
    public int numPartitions() {
      return partitions;
    }

    @Override
    public int getPartition(Object key) {
      return ((ShardSlot) key).partition();
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof ShardPartitioner p && p.partitions == partitions;
    }

    @Override
    public int hashCode() {
      return partitions;
    }
  }
}
