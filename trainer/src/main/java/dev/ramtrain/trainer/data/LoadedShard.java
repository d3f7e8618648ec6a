package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ShardBatch;
import dev.ramtrain.format.ShardReader;

/**
 * One opened shard's record batches, and where each of its rows lies in them: how a loader finds a
 * sample numbered by its row in the shard. Closes the batches, and the reader where it owns it (a
 * shard read into a loader's window; a {@link ShardSet}'s readers are the set's).
 */
final class LoadedShard implements AutoCloseable {
  private final ShardReader reader;
  private final boolean ownsReader;
  private final ShardBatch[] batches;
  private final long[] starts; // the first row of each record batch

  LoadedShard(ShardReader reader, boolean ownsReader) {
    this.reader = reader;
    this.ownsReader = ownsReader;
    this.batches = new ShardBatch[reader.batchCount()];
    this.starts = new long[batches.length];
    try {
      long row = 0;
      for (int b = 0; b < batches.length; b++) {
        batches[b] = reader.batch(b);
        starts[b] = row;
        row += batches[b].rowCount();
      }
    } catch (RuntimeException | Error e) {
      close(); // nobody else can: the constructor does not return
      throw e;
    }
  }

  String name() {
    return reader.name();
  }

  long bytes() {
    return reader.bytes();
  }

  /** Whether the shard's memory is its file's, mapped (rather than read into memory). */
  boolean mapped() {
    return reader.mapped();
  }

  /** Null while the shard's memory is its file's as opened ({@link ShardReader#changedOnDisk}). */
  String changedOnDisk() {
    return reader.changedOnDisk();
  }

  /**
   * The record batch holding row {@code row} of the shard: the last one starting at or before it
   * (an empty batch shares its start with the next one, which is the one holding the row).
   */
  int batchOf(long row) {
    return SortedLongs.firstAbove(starts, row) - 1;
  }

  ShardBatch batch(int index) {
    return batches[index];
  }

  /** Row {@code row} of the shard's place in its record batch. */
  int rowIn(int batch, long row) {
    return (int) (row - starts[batch]);
  }

  @Override
  public void close() {
    for (ShardBatch b : batches) {
      if (b != null) {
        b.close();
      }
    }
    if (ownsReader) {
      reader.close();
    }
  }
}
