package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.dataset.HadoopConf;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.run.TrainingData;
import java.io.IOException;
import java.util.Iterator;

/**
 * Ranks training on a committed dataset. Without an assignment every rank opens every shard and
 * takes its share of each global batch's positions (PyTorch's DistributedSampler), so N ranks
 * follow single-process training with the same global batch. With one ({@code ramtrain.dist.shards
 * = own}) each rank opens only the shards assigned to it and draws its batches from them, holding
 * 1/N of the data. The stage's input is just one slot per rank.
 */
final class DatasetRanks implements RankInputs<Integer> {
  private final HadoopConf hadoop; // the driver's: datasets on HDFS, S3A, ...
  private final Manifest manifest; // the version the driver holds, whatever the file says now
  private final ShardAssignment assignment; // null: every rank opens every shard
  private final long trainPerEpoch;

  DatasetRanks(
      HadoopConf hadoop, Manifest manifest, ShardAssignment assignment, long trainPerEpoch) {
    this.hadoop = hadoop;
    this.manifest = manifest;
    this.assignment = assignment;
    this.trainPerEpoch = trainPerEpoch;
  }

  @Override
  public Opened open(JobSpec spec, int rank, int world, Iterator<Integer> slot) throws IOException {
    String location = spec.run().data().requireLocation();
    Dataset ds = Dataset.of(location, manifest, hadoop.get());
    ShardSet train = shards(spec, ds, Manifest.TRAIN, rank);
    try {
      ShardSet val = shards(spec, ds, Manifest.VAL, rank);
      JobSpec mine =
          assignment == null
              ? spec.withRun(spec.run().forRank(rank, world))
              : spec.withRun(spec.run().forRankWithOwnShards(rank, world, trainPerEpoch));
      return new Opened(mine, new TrainingData(train, val, ds.manifest(), location));
    } catch (IOException | RuntimeException e) {
      train.close();
      throw e;
    }
  }

  /** The shards of {@code split} this rank reads: all, or those assigned to it. */
  private ShardSet shards(JobSpec spec, Dataset ds, String split, int rank) throws IOException {
    int window = spec.run().data().shardWindow();
    if (assignment == null) {
      return DatasetShards.open(ds, split, shard -> true, window);
    }
    return DatasetShards.open(ds, split, i -> assignment.rankOf(split, i) == rank, window);
  }
}
