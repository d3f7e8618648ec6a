package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.trainer.data.ShardSet;
import java.io.IOException;

/** Where a committed dataset directory meets the trainer: opens one split's shards for a loader. */
public final class DatasetShards {
  private DatasetShards() {}

  /** Opens (and checksums) every shard of {@code split}; the caller closes the set. */
  public static ShardSet open(Dataset dataset, String split) throws IOException {
    Manifest m = dataset.manifest();
    return new ShardSet(m.image().shape(), m.classes(), dataset.openSplit(split));
  }
}
