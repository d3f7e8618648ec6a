package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.spark.InMemoryShards;
import dev.ramtrain.etl.spark.ShardResult;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.run.TrainingData;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;

/**
 * Ranks training on the in-memory shards of their partition (those a {@link ShardAssignment} gave
 * them): each takes {@code trainPerEpoch} of its own samples per epoch, in an order of its own, and
 * evaluates its own val shards; the figures are summed over the ranks.
 */
final class InMemoryRanks implements RankInputs<ShardResult> {
  private final Manifest manifest;
  private final ShardAssignment assignment;
  private final long trainPerEpoch;

  InMemoryRanks(Manifest manifest, ShardAssignment assignment, long trainPerEpoch) {
    this.manifest = manifest;
    this.assignment = assignment;
    this.trainPerEpoch = trainPerEpoch;
  }

  /** The blocks of a node's partition that the assignment gave {@code rank}. */
  @Override
  public Iterator<ShardResult> ofRank(List<ShardResult> node, int rank) {
    return node.stream().filter(block -> assignment.rankOf(block) == rank).iterator();
  }

  @Override
  public Opened open(JobSpec spec, int rank, int world, Iterator<ShardResult> partition)
      throws IOException {
    List<ShardResult> blocks = new ArrayList<>();
    partition.forEachRemaining(blocks::add);
    blocks.sort(Comparator.comparing(ShardResult::split).thenComparingInt(ShardResult::shard));
    ShardSet train = open(blocks, Manifest.TRAIN);
    try {
      ShardSet val = open(blocks, Manifest.VAL);
      return new Opened(
          spec.withRun(spec.run().forRankWithOwnShards(rank, world, trainPerEpoch)),
          new TrainingData(train, val, manifest, "in-memory shards"));
    } catch (IOException | RuntimeException e) {
      train.close();
      throw e;
    }
  }

  private ShardSet open(List<ShardResult> blocks, String split) throws IOException {
    List<ShardReader> readers = new ArrayList<>();
    try {
      for (ShardResult block : blocks) {
        if (block.split().equals(split)) {
          readers.add(InMemoryShards.open(block));
        }
      }
    } catch (IOException | RuntimeException e) {
      readers.forEach(ShardReader::close);
      throw e;
    }
    return new ShardSet(manifest.image().shape(), manifest.classes(), readers);
  }
}
