package dev.ramtrain.etl.spark;

import dev.ramtrain.etl.dataset.DatasetFiles;
import dev.ramtrain.etl.dataset.HadoopConf;
import dev.ramtrain.etl.dataset.StagedShards;
import dev.ramtrain.etl.image.ImageProcessor;
import dev.ramtrain.etl.image.ImageStorage;
import dev.ramtrain.etl.image.JpegRows;
import dev.ramtrain.etl.source.ImageSource;
import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.etl.source.RejectReason;
import dev.ramtrain.etl.source.RejectedImageException;
import dev.ramtrain.etl.source.SampleBytes;
import dev.ramtrain.files.IoErrors;
import dev.ramtrain.files.OutputStreamChannel;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardStats;
import dev.ramtrain.format.ShardWriter;
import dev.ramtrain.format.ids.SampleIds;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.nio.channels.WritableByteChannel;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.hadoop.fs.FSError;
import org.apache.spark.SparkEnv;
import scala.Tuple2;

/**
 * The executor side: one partition becomes one shard. Each sample is decoded, resized and augmented
 * and its images appended to the shard; bad inputs are recorded and skipped.
 */
final class ShardTask implements Serializable {
  private final ShardPlan plan;
  private final ShardSchema schema;
  private final ImageProcessor processor;
  private final ImageSource source;
  private final StagedShards staging; // null in memory mode
  private final long batchTargetBytes;
  private final long maxFileBytes;
  private final HadoopConf hadoop;
  private final ShardCounters counters;
  private final ImageStorage storage;

  ShardTask(
      ShardPlan plan,
      ShardSchema schema,
      ImageProcessor processor,
      ImageSource source,
      StagedShards staging,
      PreprocessSpec options,
      HadoopConf hadoop,
      ShardCounters counters) {
    this.plan = plan;
    this.schema = schema;
    this.processor = processor;
    this.source = source;
    this.staging = staging;
    this.batchTargetBytes = options.batchTargetBytes();
    this.maxFileBytes = options.maxFileBytes();
    this.hadoop = hadoop;
    this.counters = counters;
    this.storage = options.storage();
  }

  Iterator<ShardResult> run(int partition, Iterator<Tuple2<ShardSlot, RawSample>> samples)
      throws IOException {
    String split = plan.splitOf(partition);
    int shard = plan.shardOf(partition);
    ByteArrayOutputStream memory = staging == null ? new ByteArrayOutputStream() : null;
    List<Reject> rejects = new ArrayList<>();
    long inputs = 0;
    ShardStats stats;
    try (WritableByteChannel out =
            memory != null ? new OutputStreamChannel(memory) : staging.create(split, shard);
        ShardWriter writer = new ShardWriter(schema, out, batchTargetBytes);
        JpegRows jpegRows = storage.encoded() ? new JpegRows(storage, schema.shape()) : null) {
      while (samples.hasNext()) {
        Tuple2<ShardSlot, RawSample> next = samples.next();
        RawSample sample = next._2();
        inputs++;
        try {
          sample = read(sample);
          append(writer, jpegRows, next._1().id(), sample);
        } catch (RejectedImageException e) {
          rejects.add(new Reject(source.locate(sample.key()), e.reason(), e.getMessage()));
        }
        counters.files().add(1);
        counters.bytes().add(sample.isRead() ? sample.content().length : 0);
      }
      long finishStart = System.nanoTime();
      stats = writer.finish();
      counters.writeNanos().add(System.nanoTime() - finishStart);
    } catch (IOException e) {
      if (staging == null) {
        throw e;
      }
      // The one line a person reads: the system's reason and the file (Hadoop's are bare).
      throw IoErrors.writing(DatasetFiles.shown(staging.path(split, shard)), e);
    } catch (FSError e) { // Hadoop's local filesystem throws a write's IOException as an Error
      throw IoErrors.writing(DatasetFiles.shown(staging.path(split, shard)), IoErrors.unwrap(e));
    }
    if (staging != null && stats.rows() == 0) {
      // Every input of this shard was rejected: the manifest will not list it, so it goes.
      staging.discard(split, shard);
    }
    byte[] bytes = memory == null ? null : memory.toByteArray();
    String executor = SparkEnv.get().executorId();
    return List.of(new ShardResult(split, shard, inputs, stats, rejects, bytes, executor))
        .iterator();
  }

  private static byte[] encode(JpegRows rows, long pixels, byte[] source) throws IOException {
    try {
      return rows.encode(pixels, source);
    } catch (RejectedImageException e) {
      throw new IllegalStateException("a decoded image's source no longer parses", e);
    }
  }

  private RawSample read(RawSample sample) throws RejectedImageException, IOException {
    if (sample.isRead()) {
      return sample;
    }
    long start = System.nanoTime();
    try {
      return SampleBytes.read(sample, hadoop.get(), maxFileBytes);
    } finally {
      counters.readNanos().add(System.nanoTime() - start);
    }
  }

  /** Appends the images of one sample, as JPEG rows where {@code jpegRows} is given and says so. */
  private void append(ShardWriter writer, JpegRows jpegRows, long id, RawSample sample)
      throws RejectedImageException, IOException {
    if (sample.label() < 0) {
      throw new RejectedImageException(
          RejectReason.MISSING_LABEL,
          source.type().equals("image-folder")
              ? "unlabeled: the file is not inside a class folder"
              : "no label, or a label outside the class list");
    }
    if (sample.content().length > maxFileBytes) {
      throw SampleBytes.tooLarge(sample.content().length, maxFileBytes);
    }
    long start = System.nanoTime();
    long[] writing = {0};
    try {
      processor.process(
          sample,
          id,
          (copy, pixels) -> {
            long appendStart = System.nanoTime();
            long copyId = SampleIds.copyId(id, copy);
            byte[] jpeg = null;
            if (jpegRows != null) {
              // Only the plain copy can be the source image itself, decoded and nothing more.
              byte[] source = copy == 0 && !sample.isRaw() ? sample.content() : null;
              jpeg = encode(jpegRows, pixels, source);
            }
            if (jpeg != null) {
              writer.appendJpeg(copyId, sample.label(), jpeg);
            } else {
              writer.append(copyId, sample.label(), pixels);
            }
            writing[0] += System.nanoTime() - appendStart;
          });
    } finally {
      counters.writeNanos().add(writing[0]);
      counters.decodeNanos().add(System.nanoTime() - start - writing[0]);
    }
  }
}
