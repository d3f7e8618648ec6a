package dev.ramtrain.format;

import java.io.Serializable;
import java.util.List;

/** What a finished shard holds: rows, file size, CRC32C of the file bytes and rows per class. */
public record ShardStats(long rows, long bytes, long crc32c, List<Long> classCounts)
    implements Serializable {

  public ShardStats {
    classCounts = List.copyOf(classCounts);
  }
}
