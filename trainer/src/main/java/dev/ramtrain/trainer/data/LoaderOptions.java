package dev.ramtrain.trainer.data;

import java.io.Serializable;

/**
 * How a loader walks its shards: samples per batch, worker threads, batches prefetched into pinned
 * staging, the order ({@link Sampling}), the augmentation, and which rank of how many it is.
 */
public record LoaderOptions(
    int batchSize,
    int workers,
    int prefetch,
    Sampling sampling,
    Augmentation augmentation,
    Rank rank)
    implements Serializable {

  /**
   * What becomes of the samples that do not fill a batch. DROP them or PAD the last batch by
   * wrapping around: every rank gets the same number of full batches, as data-parallel training
   * needs. KEEP a short last batch: every sample exactly once over all ranks (evaluation), the
   * ranks' shares differing by at most one sample.
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

  /** Random crop after zero padding by {@code cropPadding} pixels, and horizontal flips. */
  public record Augmentation(int cropPadding, boolean flip) implements Serializable {
    public static final Augmentation NONE = new Augmentation(0, false);

    public Augmentation {
      if (cropPadding < 0) {
        throw new IllegalArgumentException("crop padding must be >= 0");
      }
    }
  }

  /**
   * This loader's slice: rank {@code rank} of {@code worldSize} (data parallel training). Without
   * {@code ownShards} every rank opens the same shards and takes every worldSize-th sample of the
   * shared order (PyTorch's DistributedSampler). With it the loader's shards are this rank's own
   * (those cached where it runs) and each epoch it takes {@code ownShare} samples of them in an
   * order of its own, the count every rank takes, so that all run the same number of batches (KEEP,
   * for evaluation: every own sample once, none if it holds none).
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

  public LoaderOptions {
    if (batchSize < 1 || workers < 1 || prefetch < 1) {
      throw new IllegalArgumentException("batch size, workers and prefetch must be >= 1");
    }
  }

  /** Shuffled, augmented, a single rank: for training. */
  public static LoaderOptions training(
      int batchSize,
      int workers,
      int prefetch,
      long seed,
      Remainder remainder,
      Augmentation augmentation) {
    return new LoaderOptions(
        batchSize,
        workers,
        prefetch,
        Sampling.shuffled(seed, remainder),
        augmentation,
        Rank.SINGLE);
  }

  /** In order, no augmentation: for evaluation. */
  public static LoaderOptions evaluation(int batchSize, int workers) {
    return new LoaderOptions(
        batchSize, workers, 2, Sampling.IN_ORDER, Augmentation.NONE, Rank.SINGLE);
  }
}
