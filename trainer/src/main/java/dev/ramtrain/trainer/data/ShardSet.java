package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardReader;
import java.util.List;

/**
 * The shards of one split: what a loader reads. Either opened, every one mapped or in memory for
 * the set's life (it owns the readers), or a {@link ShardSource} read a window of {@link
 * #windowShards} at a time, for data larger than the memory the loader may take (and shards on a
 * Hadoop filesystem, streamed rather than copied whole). Whoever knows where the shards live makes
 * the set (a dataset directory, blocks of a Spark job, a test's files); the trainer only reads.
 */
public final class ShardSet implements AutoCloseable {
  private final ImageShape shape;
  private final List<String> classes;
  private final List<ShardReader> readers; // empty when windowed
  private final ShardSource source; // null when opened
  private final int windowShards;

  public ShardSet(ImageShape shape, List<String> classes, List<ShardReader> readers) {
    this.shape = shape;
    this.classes = List.copyOf(classes);
    this.readers = List.copyOf(readers);
    this.source = null;
    this.windowShards = 0;
    for (ShardReader r : readers) {
      if (!r.schema().shape().equals(shape)) {
        throw new IllegalArgumentException(
            r.name() + " holds " + r.schema().shape() + " images, expected " + shape);
      }
    }
  }

  private ShardSet(ShardSource source, int windowShards) {
    if (windowShards < 1) {
      throw new IllegalArgumentException("a window holds at least one shard, not " + windowShards);
    }
    this.shape = source.schema().shape();
    this.classes = source.schema().classes();
    this.readers = List.of();
    this.source = source;
    this.windowShards = windowShards;
  }

  /** The shards of {@code source}, read {@code windowShards} at a time by a loader. */
  public static ShardSet windowed(ShardSource source, int windowShards) {
    return new ShardSet(source, windowShards);
  }

  public ImageShape shape() {
    return shape;
  }

  public List<String> classes() {
    return classes;
  }

  /** Whether the shards are read a window at a time ({@link #source}) rather than opened. */
  public boolean windowed() {
    return source != null;
  }

  /** The opened shards' readers; none when {@link #windowed}. */
  public List<ShardReader> readers() {
    return readers;
  }

  /** Where a windowed set's shards are read from; null when opened. */
  public ShardSource source() {
    return source;
  }

  /** Shards a windowed set's loader reads at a time (and keeps two windows of); 0 when opened. */
  public int windowShards() {
    return windowShards;
  }

  @Override
  public void close() {
    readers.forEach(ShardReader::close);
  }
}
