package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardReader;
import java.util.List;

/**
 * The opened shards of one split: what a loader reads. Owns the readers. Whoever knows where the
 * shards live opens them (a dataset directory on a Hadoop filesystem, blocks of a Spark job, a
 * test's files); the trainer only reads.
 */
public final class ShardSet implements AutoCloseable {
  private final ImageShape shape;
  private final List<String> classes;
  private final List<ShardReader> readers;

  public ShardSet(ImageShape shape, List<String> classes, List<ShardReader> readers) {
    this.shape = shape;
    this.classes = List.copyOf(classes);
    this.readers = List.copyOf(readers);
    for (ShardReader r : readers) {
      if (!r.schema().shape().equals(shape)) {
        throw new IllegalArgumentException(
            r.name() + " holds " + r.schema().shape() + " images, expected " + shape);
      }
    }
  }

  public ImageShape shape() {
    return shape;
  }

  public List<String> classes() {
    return classes;
  }

  public List<ShardReader> readers() {
    return readers;
  }

  @Override
  public void close() {
    readers.forEach(ShardReader::close);
  }
}
