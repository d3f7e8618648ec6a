package dev.ramtrain.jobs.train;

import dev.ramtrain.trainer.run.TrainingData;
import java.io.IOException;
import java.io.Serializable;
import java.util.Iterator;
import java.util.List;

/**
 * What each rank of a data-parallel stage trains on, opened on its executor from its partition of
 * the stage's input.
 *
 * @param <T> the records of a rank's partition
 */
interface RankInputs<T> extends Serializable {

  /**
   * Opens rank {@code rank}'s data from {@code partition}, with {@code spec} as that rank loads it
   * ({@code RunSpec.forRank} or its own-shards variant).
   */
  Opened open(JobSpec spec, int rank, int world, Iterator<T> partition) throws IOException;

  /**
   * Rank {@code rank}'s part of its node's partition {@code node} (one trainer task drives a node's
   * devices): by default none, each rank opening all it needs itself.
   */
  default Iterator<T> ofRank(List<T> node, int rank) {
    return java.util.Collections.emptyIterator();
  }

  /** A rank's spec and opened data; closing closes its shards. */
  record Opened(JobSpec spec, TrainingData data) implements AutoCloseable {
    @Override
    public void close() {
      try (var train = data.train();
          var val = data.val()) {
        // both closed, the second even if the first fails
      }
    }
  }
}
