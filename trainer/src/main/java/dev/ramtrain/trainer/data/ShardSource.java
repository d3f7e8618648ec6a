package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * The shards of one split, read on demand rather than opened all at once: what a loader keeping
 * only a window of shards in memory reads from (a dataset larger than the memory it may use, or on
 * a Hadoop filesystem, streamed shard by shard). Whoever knows where the shards live implements it;
 * row counts and sizes come from the dataset's manifest, so nothing is read to plan an epoch.
 */
public interface ShardSource {
  /** The shards' schema: image shape, classes, storage (as the manifest says). */
  ShardSchema schema();

  int count();

  long rows(int shard);

  /** The shard's file size: the memory reading it takes. */
  long bytes(int shard);

  /** The shard's name in errors: its file. */
  String name(int shard);

  /**
   * Reads shard {@code shard} into {@code into} (direct, at least {@link #bytes} long, owned by the
   * caller), checks it (checksum, schema, rows) and returns a reader over that memory; the caller
   * closes the reader before reusing the memory.
   */
  ShardReader read(int shard, ByteBuffer into) throws IOException;
}
