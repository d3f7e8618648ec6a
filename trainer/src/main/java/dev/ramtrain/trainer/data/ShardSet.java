package dev.ramtrain.trainer.data;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.shard.ImageShape;
import dev.ramtrain.etl.shard.Manifest;
import dev.ramtrain.etl.shard.ShardReader;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/** The opened shards of one split: what a loader reads. Owns the readers. */
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

  /** Opens (and checksums) every shard of {@code split}. */
  public static ShardSet open(Dataset dataset, String split) throws IOException {
    Manifest m = dataset.manifest();
    List<ShardReader> readers = new ArrayList<>();
    try {
      for (Manifest.Shard shard : m.split(split).shards()) {
        readers.add(dataset.openShard(shard, true));
      }
    } catch (IOException | RuntimeException e) {
      readers.forEach(ShardReader::close);
      throw e;
    }
    return new ShardSet(m.image().shape(), m.classes(), readers);
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
