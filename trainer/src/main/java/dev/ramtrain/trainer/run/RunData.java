package dev.ramtrain.trainer.run;

import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.data.BadSamples;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.ShardSet;
import java.io.Serializable;

/**
 * Where a run's samples come from and how they are loaded for training and for evaluation: {@code
 * filter} resizes load-time crops, {@code badSamples} says what a stored JPEG that does not decode
 * does, {@code shardWindow} how many shards a loader reads at a time (0: every shard opened at
 * once).
 */
public record RunData(
    String location,
    LoaderSpec train,
    LoaderSpec eval,
    ResizeFilter filter,
    BadSamples badSamples,
    int shardWindow)
    implements Serializable {
  /** A loader over {@code shards} as {@code options} say, crops resized with {@code filter}. */
  public DataLoader loader(
      Backend backend,
      ShardSet shards,
      LoaderSpec options,
      ResizeFilter filter,
      ImageNatives natives) {
    return new DataLoader(
        backend, shards, options, filter.resamplers(natives), natives.jpeg(), badSamples);
  }

  /** The dataset directory; a usage error when none was given. */
  public String requireLocation() {
    if (location.isBlank()) {
      throw new ConfigException(
          "ramtrain.train.dataset: a dataset directory is required (--dataset DIR)");
    }
    return location;
  }

  /**
   * These loaders as rank {@code train.rank()} of {@code train.worldSize()}: each loads its share
   * of every global batch (as PyTorch's DistributedSampler), and evaluation batches shrink alike,
   * as the model runs at most the per-rank batch.
   */
  RunData forRank(LoaderSpec.Rank trainRank, LoaderSpec.Rank evalRank) {
    int world = trainRank.worldSize();
    int global = train.batchSize();
    if (global % world != 0) {
      throw new ConfigException(
          String.format(
              "ramtrain.train.batch-size = %d cannot be split evenly over ramtrain.dist.ranks = %d",
              global, world));
    }
    return new RunData(
        location,
        train.forRank(global / world, trainRank),
        eval.forRank(Math.max(1, eval.batchSize() / world), evalRank),
        filter,
        badSamples,
        shardWindow);
  }
}
