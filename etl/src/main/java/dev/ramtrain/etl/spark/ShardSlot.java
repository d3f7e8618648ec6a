package dev.ramtrain.etl.spark;

import java.io.Serializable;

/**
 * Where a sample goes: output partition {@code partition} (one per shard) at sort position {@code
 * order}. Both derive from the sample id and seed alone, so shard contents and order never depend
 * on how the input was partitioned.
 */
record ShardSlot(int partition, long order, long id)
    implements Comparable<ShardSlot>, Serializable {
  @Override
  public int compareTo(ShardSlot o) {
    int c = Integer.compare(partition, o.partition);
    if (c == 0) {
      c = Long.compare(order, o.order);
    }
    return c == 0 ? Long.compare(id, o.id) : c;
  }
}
