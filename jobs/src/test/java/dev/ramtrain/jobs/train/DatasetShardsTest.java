package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.ramtrain.format.Manifest;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A remote dataset too large to read whole is read by windows that fit the machine. */
class DatasetShardsTest {
  private static List<Manifest.Shard> shards(int count, long bytes) {
    List<Manifest.Shard> out = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      out.add(
          new Manifest.Shard("train/part-" + i + ".arrow", 10, bytes, "00000000", List.of(10L)));
    }
    return out;
  }

  @Test
  void aRemoteSplitWithinHalfTheMemoryIsReadWhole() {
    assertEquals(0, DatasetShards.remoteWindow(shards(10, 100), 2000)); // 1,000 of 2,000
    assertEquals(0, DatasetShards.remoteWindow(List.of(), 10));
  }

  @Test
  void aLargerOneIsReadByWindowsOfAQuarterOfTheMemory() {
    // 1,000 bytes, 1,800 available: two windows of 2 shards (400 bytes) within 450.
    assertEquals(2, DatasetShards.remoteWindow(shards(10, 100), 1800));
    // However small the machine, a window holds one shard.
    assertEquals(1, DatasetShards.remoteWindow(shards(10, 100), 300));
  }
}
