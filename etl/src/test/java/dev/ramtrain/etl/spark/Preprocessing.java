package dev.ramtrain.etl.spark;

import dev.ramtrain.etl.TestSpark;
import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ImageStorage;
import dev.ramtrain.etl.image.ImageTransform;
import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.etl.source.ImageSource;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;
import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/** Helpers shared by the preprocessing tests. */
final class Preprocessing {
  private Preprocessing() {}

  static PreprocessSpec options(
      ImageShape shape, Augmentation aug, PreprocessSpec.Output mode, Path out, double maxRejects) {
    return new PreprocessSpec(
        new ImageTransform(shape, ResizeMode.SHORTER_SIDE_CROP, aug),
        ImageDecoder.Kind.OPENCV,
        1L << 26,
        1L << 26,
        0.25,
        11,
        20_000, // small shards, so a tiny dataset still makes several
        4_000,
        0,
        1,
        maxRejects,
        mode,
        out == null ? null : out.toString(),
        false,
        true,
        true,
        ImageStorage.RAW);
  }

  /**
   * {@code o} writing to {@code output} (any Hadoop URI), replacing a dataset if {@code overwrite}.
   */
  static PreprocessSpec to(PreprocessSpec o, String output, boolean overwrite) {
    return new PreprocessSpec(
        o.transform(),
        o.decoder(),
        o.maxPixels(),
        o.maxFileBytes(),
        o.valFraction(),
        o.seed(),
        o.shardTargetBytes(),
        o.batchTargetBytes(),
        o.shardsPerSplit(),
        o.minShardsPerSplit(),
        o.maxRejectFraction(),
        PreprocessSpec.Output.OFFLINE,
        output,
        overwrite,
        o.directIo(),
        o.exifOrientation(),
        ImageStorage.RAW);
  }

  /** {@code o} with a fixed number of shards per split and no val split. */
  static PreprocessSpec withShards(PreprocessSpec o, int shards) {
    return new PreprocessSpec(
        o.transform(),
        o.decoder(),
        o.maxPixels(),
        o.maxFileBytes(),
        0,
        o.seed(),
        o.shardTargetBytes(),
        o.batchTargetBytes(),
        shards,
        shards,
        o.maxRejectFraction(),
        o.output(),
        o.outputPath(),
        o.overwrite(),
        o.directIo(),
        o.exifOrientation(),
        ImageStorage.RAW);
  }

  static PreprocessResult run(ImageSource source, PreprocessSpec options) throws IOException {
    return new PreprocessJob(TestSpark.session(), source, options).run();
  }

  static Dataset open(Path dir) throws IOException {
    return Dataset.open(dir.toString(), TestSpark.session().sparkContext().hadoopConfiguration());
  }

  /** id to (label, pixels) of every row of a split. */
  static Map<Long, Row> rows(Dataset dataset, String split) throws IOException {
    Map<Long, Row> rows = new HashMap<>();
    for (Manifest.Shard shard : dataset.manifest().split(split).shards()) {
      try (ShardReader reader = dataset.openShard(shard, true)) {
        for (int b = 0; b < reader.batchCount(); b++) {
          try (ShardBatch batch = reader.batch(b)) {
            for (int r = 0; r < batch.rowCount(); r++) {
              rows.put(batch.id(r), new Row(batch.label(r), batch.image(r)));
            }
          }
        }
      }
    }
    return rows;
  }

  record Row(int label, byte[] pixels) {}
}
