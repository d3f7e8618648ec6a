package dev.ramtrain.etl.spark;

import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ImageStorage;
import dev.ramtrain.etl.image.ImageTransform;
import java.io.Serializable;

/**
 * Everything the preprocessing job needs besides its source, checked when built. {@code directIo}:
 * write local shards past the page cache ({@link dev.ramtrain.etl.dataset.DirectFileChannel}).
 * {@code exifOrientation}: turn photos upright by their EXIF orientation before anything else.
 * {@code storage}: pixels or JPEG rows in the shards.
 */
public record PreprocessSpec(
    ImageTransform transform,
    ImageDecoder.Kind decoder,
    long maxPixels,
    long maxFileBytes,
    double valFraction,
    long seed,
    long shardTargetBytes,
    long batchTargetBytes,
    int shardsPerSplit,
    int minShardsPerSplit,
    double maxRejectFraction,
    Output output,
    String outputPath,
    boolean overwrite,
    boolean directIo,
    boolean exifOrientation,
    ImageStorage storage)
    implements Serializable {

  /** Shards are memory-mapped whole by readers, so they stay well under 2 GiB. */
  public static final long MAX_SHARD_BYTES = 1L << 30;

  /** Offline: commit a dataset directory. Memory: keep shards as cached blocks on executors. */
  public enum Output {
    OFFLINE,
    MEMORY
  }

  public PreprocessSpec {
    require(storage != null, "ramtrain.etl.store is required");
    require(valFraction >= 0 && valFraction < 1, "ramtrain.etl.val-fraction must be in [0, 1)");
    require(
        maxRejectFraction >= 0 && maxRejectFraction <= 1,
        "ramtrain.etl.max-reject-fraction must be in [0, 1]");
    require(
        shardTargetBytes > 0 && shardTargetBytes <= MAX_SHARD_BYTES,
        "ramtrain.etl.shard-target-bytes must be in (0, 1GiB]: shards are memory-mapped whole");
    require(batchTargetBytes > 0, "ramtrain.etl.batch-target-bytes must be positive");
    require(shardsPerSplit >= 0, "ramtrain.etl.shards must be >= 0 (0 = from shard-target-bytes)");
    require(minShardsPerSplit >= 1, "ramtrain.etl.min-shards must be >= 1");
    require(
        maxPixels > 0 && maxFileBytes > 0,
        "ramtrain.etl.max-pixels and max-file-bytes must be positive");
    require(
        output == Output.MEMORY || (outputPath != null && !outputPath.isBlank()),
        "ramtrain.etl.output is required for offline preprocessing (--output)");
  }

  private static void require(boolean ok, String message) {
    if (!ok) {
      throw new IllegalArgumentException(message);
    }
  }
}
