package dev.ramtrain.trainer.data;

/**
 * How a loader walks its shards: batch size, workers, prefetched batches, the seed of the per-epoch
 * shuffle and augmentation, this rank of {@code worldSize}, and what to do with the remainder.
 */
public record LoaderOptions(
    int batchSize,
    int workers,
    int prefetch,
    long seed,
    boolean shuffle,
    Remainder remainder,
    int rank,
    int worldSize,
    int cropPadding,
    boolean flip) {

  /**
   * Every rank gets the same number of batches: DROP the samples that do not fill a batch, PAD the
   * last batch by wrapping around, or KEEP a short last batch (evaluation: every sample once).
   */
  public enum Remainder {
    DROP,
    PAD,
    KEEP
  }

  public LoaderOptions {
    if (batchSize < 1 || workers < 1 || prefetch < 1) {
      throw new IllegalArgumentException("batch size, workers and prefetch must be >= 1");
    }
    if (worldSize < 1 || rank < 0 || rank >= worldSize) {
      throw new IllegalArgumentException("rank " + rank + " outside [0, " + worldSize + ")");
    }
    if (cropPadding < 0) {
      throw new IllegalArgumentException("crop padding must be >= 0");
    }
  }

  /** In order, no augmentation: for evaluation. */
  public static LoaderOptions evaluation(int batchSize, int workers) {
    return new LoaderOptions(batchSize, workers, 2, 0, false, Remainder.KEEP, 0, 1, 0, false);
  }
}
