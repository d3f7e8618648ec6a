package dev.ramtrain.etl.spark;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardFormatException;
import dev.ramtrain.format.ShardReader;
import java.nio.ByteBuffer;
import org.apache.spark.api.java.JavaRDD;

/**
 * Shards kept as cached blocks in executor memory by a preprocessing run, for a trainer stage of
 * the same Spark application: partition i of {@link #blocks()} holds one shard. Close to unpersist.
 */
public final class InMemoryShards implements AutoCloseable {
  private final Manifest manifest;
  private final JavaRDD<ShardResult> blocks;

  InMemoryShards(Manifest manifest, JavaRDD<ShardResult> blocks) {
    this.manifest = manifest;
    this.blocks = blocks;
  }

  public Manifest manifest() {
    return manifest;
  }

  public JavaRDD<ShardResult> blocks() {
    return blocks;
  }

  /** Opens a cached shard (on the executor that holds it), checking its CRC32C. */
  public static ShardReader open(ShardResult block) throws ShardFormatException {
    String name = "memory:" + block.split() + "/" + block.shard();
    return ShardReader.open(name, ByteBuffer.wrap(block.bytes()), block.stats().crc32c());
  }

  @Override
  public void close() {
    blocks.unpersist(false);
  }
}
