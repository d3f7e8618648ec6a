package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.dataset.HadoopConf;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.trainer.data.ShardSet;
import java.io.IOException;
import java.util.Iterator;

/**
 * Ranks training on a committed dataset: every rank opens every shard and takes its share of each
 * global batch's positions (PyTorch's DistributedSampler), so N ranks follow single-process
 * training with the same global batch. The stage's input is just one slot per rank.
 */
final class DatasetRanks implements RankInputs<Integer> {
  private final HadoopConf hadoop; // the driver's: datasets on HDFS, S3A, ...

  DatasetRanks(HadoopConf hadoop) {
    this.hadoop = hadoop;
  }

  @Override
  public Opened open(RunSpec spec, int rank, int world, Iterator<Integer> slot) throws IOException {
    String location = spec.data().requireLocation();
    Dataset ds = Dataset.open(location, hadoop.get());
    ShardSet train = DatasetShards.open(ds, Manifest.TRAIN);
    try {
      ShardSet val = DatasetShards.open(ds, Manifest.VAL);
      return new Opened(
          spec.forRank(rank, world), new TrainingData(train, val, ds.manifest(), location));
    } catch (IOException | RuntimeException e) {
      train.close();
      throw e;
    }
  }
}
