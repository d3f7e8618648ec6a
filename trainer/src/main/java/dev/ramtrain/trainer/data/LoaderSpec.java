package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import java.io.Serializable;

/**
 * How a loader walks its shards: samples per batch, worker threads, batches prefetched into pinned
 * staging, the order ({@link Sampling}), the augmentation, which rank of how many it is, and how
 * many of its batches make one optimizer step (gradient accumulation), the unit its remainder rule
 * applies to.
 */
public record LoaderSpec(
    int batchSize,
    int workers,
    int prefetch,
    Sampling sampling,
    SampleAugmentation augmentation,
    Rank rank,
    int batchesPerStep)
    implements Serializable {

  /**
   * What becomes of the samples that do not fill a step (a batch on every rank, times the batches
   * accumulated into one step). DROP them or PAD the last step by wrapping around: every rank gets
   * the same number of full batches, as data-parallel training needs. KEEP a short last batch:
   * every sample exactly once over all ranks (evaluation), the ranks' shares differing by at most
   * one sample.
   */
  public enum Remainder {
    DROP,
    PAD,
    KEEP
  }

  /** The per-epoch order: shuffled or not, from {@code seed} (which also seeds augmentation). */
  public record Sampling(long seed, boolean shuffle, Remainder remainder) implements Serializable {
    public static final Sampling IN_ORDER = new Sampling(0, false, Remainder.KEEP);

    public static Sampling shuffled(long seed, Remainder remainder) {
      return new Sampling(seed, true, remainder);
    }
  }

  /**
   * Load-time augmentation, drawn anew every epoch from (seed, epoch, sample id): a random crop
   * after zero padding by {@code cropPadding} pixels (CIFAR's), or a {@link InputResize} (a random
   * resized crop for training, a resize and centre crop for evaluation; null keeps the stored
   * size), then horizontal flips.
   */
  public record SampleAugmentation(int cropPadding, boolean flip, InputResize resize)
      implements Serializable {
    public static final SampleAugmentation NONE = new SampleAugmentation(0, false);

    public SampleAugmentation {
      if (cropPadding < 0) {
        throw new IllegalArgumentException("crop padding must be >= 0");
      }
      if (cropPadding > 0 && resize != null) {
        throw new IllegalArgumentException(
            "crop padding " + cropPadding + " and a resized crop exclude each other");
      }
    }

    public SampleAugmentation(int cropPadding, boolean flip) {
      this(cropPadding, flip, null);
    }
  }

  /**
   * This loader's slice: rank {@code rank} of {@code worldSize} (data parallel training). Without
   * {@code ownShards} every rank opens the same shards and, training, takes slice {@code rank} of
   * every global batch of the shared order (positions [g + rank·b, g + (rank + 1)·b) of the global
   * batch starting at g), so that N ranks see the batches one process accumulating N batches per
   * step sees; evaluating (KEEP), every worldSize-th sample. With it the loader's shards are this
   * rank's own (those cached where it runs) and each epoch it takes {@code ownShare} samples of
   * them in an order of its own, the count every rank takes, so that all run the same number of
   * batches (KEEP, for evaluation: every own sample once, none if it holds none).
   */
  public record Rank(int rank, int worldSize, boolean ownShards, long ownShare)
      implements Serializable {
    public static final Rank SINGLE = new Rank(0, 1);

    public Rank {
      if (worldSize < 1 || rank < 0 || rank >= worldSize) {
        throw new IllegalArgumentException("rank " + rank + " outside [0, " + worldSize + ")");
      }
      if (ownShare < 0 || (!ownShards && ownShare != 0)) {
        throw new IllegalArgumentException("own share " + ownShare + " for shards not owned");
      }
    }

    /** Rank {@code rank} of {@code worldSize}, every rank opening the same shards. */
    public Rank(int rank, int worldSize) {
      this(rank, worldSize, false, 0);
    }

    /** Rank {@code rank} of {@code worldSize}, taking {@code share} of its own shards' samples. */
    public static Rank owning(int rank, int worldSize, long share) {
      return new Rank(rank, worldSize, true, share);
    }
  }

  public LoaderSpec {
    if (batchSize < 1 || workers < 1 || prefetch < 1 || batchesPerStep < 1) {
      throw new IllegalArgumentException(
          "batch size, workers, prefetch and batches per step must be >= 1");
    }
  }

  /** Every batch a step of its own. */
  public LoaderSpec(
      int batchSize,
      int workers,
      int prefetch,
      Sampling sampling,
      SampleAugmentation augmentation,
      Rank rank) {
    this(batchSize, workers, prefetch, sampling, augmentation, rank, 1);
  }

  /** These options with {@code batches} batches accumulated into each optimizer step. */
  public LoaderSpec withBatchesPerStep(int batches) {
    return new LoaderSpec(batchSize, workers, prefetch, sampling, augmentation, rank, batches);
  }

  /** These options with the images resized by {@code resize} (null: as stored). */
  public LoaderSpec withResize(InputResize resize) {
    SampleAugmentation a =
        new SampleAugmentation(augmentation.cropPadding(), augmentation.flip(), resize);
    return new LoaderSpec(batchSize, workers, prefetch, sampling, a, rank, batchesPerStep);
  }

  /** The shape of the images the loader's batches hold for images stored as {@code stored}. */
  public ImageShape inputShape(ImageShape stored) {
    return augmentation.resize() == null ? stored : augmentation.resize().outputShape(stored);
  }

  /** These options for {@code other}, with batches of {@code batch}. */
  public LoaderSpec forRank(int batch, Rank other) {
    return new LoaderSpec(batch, workers, prefetch, sampling, augmentation, other, batchesPerStep);
  }

  /** Shuffled, augmented, a single rank: for training. */
  public static LoaderSpec training(
      int batchSize,
      int workers,
      int prefetch,
      long seed,
      Remainder remainder,
      SampleAugmentation augmentation) {
    return new LoaderSpec(
        batchSize,
        workers,
        prefetch,
        Sampling.shuffled(seed, remainder),
        augmentation,
        Rank.SINGLE);
  }

  /** In order, no augmentation: for evaluation. */
  public static LoaderSpec evaluation(int batchSize, int workers) {
    return evaluation(batchSize, workers, null);
  }

  /** In order, each image resized by {@code resize} (null: as stored), for evaluation. */
  public static LoaderSpec evaluation(int batchSize, int workers, InputResize resize) {
    return new LoaderSpec(
        batchSize,
        workers,
        2,
        Sampling.IN_ORDER,
        new SampleAugmentation(0, false, resize),
        Rank.SINGLE);
  }
}
