package dev.ramtrain.etl.spark;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardFormatException;
import dev.ramtrain.format.ShardReader;
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;

/**
 * Shards kept as cached blocks in executor memory by a preprocessing run, for a trainer stage of
 * the same Spark application: partition i of {@link #blocks()} holds one shard. Close to unpersist.
 */
public final class InMemoryShards implements AutoCloseable {
  private final Manifest manifest;
  private final JavaRDD<ShardResult> blocks;
  private final List<ShardResult> placed;

  InMemoryShards(Manifest manifest, JavaRDD<ShardResult> blocks, List<ShardResult> placed) {
    this.manifest = manifest;
    this.blocks = blocks;
    this.placed = List.copyOf(placed);
  }

  public Manifest manifest() {
    return manifest;
  }

  public JavaRDD<ShardResult> blocks() {
    return blocks;
  }

  /**
   * Every shard's result without its bytes, in split and shard order, naming the executor that
   * cached it: where a trainer stage finds it without crossing the network.
   */
  public List<ShardResult> placed() {
    return placed;
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
