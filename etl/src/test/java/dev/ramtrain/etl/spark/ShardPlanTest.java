package dev.ramtrain.etl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ImageStorage;
import dev.ramtrain.etl.image.ImageTransform;
import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.format.ImageShape;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ShardPlanTest {
  private static PreprocessSpec options(int shards, int minShards, double valFraction) {
    return new PreprocessSpec(
        new ImageTransform(new ImageShape(64, 64, 3), ResizeMode.STRETCH, Augmentation.NONE),
        ImageDecoder.Kind.OPENCV,
        1 << 20,
        1 << 20,
        valFraction,
        7,
        64L << 20,
        4 << 20,
        shards,
        minShards,
        0,
        PreprocessSpec.Output.MEMORY,
        null,
        false,
        true,
        true,
        ImageStorage.RAW);
  }

  @Test
  void shardCountFollowsBytesWithAFloorAndNeverExceedsInputs() {
    // 100,000 images of 12,288 bytes = 1.17 GiB: 19 shards of at most 64 MiB.
    ShardPlan plan =
        ShardPlan.of(Map.of("train", 100_000L, "val", 10L), options(0, 8, 0.1), 1, 12_288);
    assertEquals(19, plan.trainShards());
    assertEquals(8, plan.valShards(), "the floor keeps cores busy on a small split");
    assertEquals(
        3,
        ShardPlan.of(Map.of("train", 3L), options(0, 8, 0.1), 1, 12_288).trainShards(),
        "no empty shards");
    assertEquals(0, ShardPlan.of(Map.of("train", 3L), options(0, 8, 0.1), 1, 12_288).valShards());
    assertEquals(
        37,
        ShardPlan.of(Map.of("train", 100_000L), options(0, 8, 0.1), 2, 12_288).trainShards(),
        "copies count");
  }

  @Test
  void explicitShardCountThatWouldMakeHugeShardsIsRefused() {
    var e =
        assertThrows(
            PreprocessException.class,
            () -> ShardPlan.of(Map.of("train", 1_000_000L), options(2, 1, 0.1), 1, 12_288));
    assertTrue(e.getMessage().contains("ramtrain.etl.shards=2"), e.getMessage());
  }

  @Test
  void splitAndPlacementDependOnlyOnIdAndSeed() {
    ShardPlan plan =
        ShardPlan.of(Map.of("train", 9_000L, "val", 1_000L), options(0, 8, 0.1), 1, 12_288);
    Map<String, Integer> perSplit = new HashMap<>();
    int[] perShard = new int[plan.partitions()];
    for (long id = 0; id < 20_000; id++) {
      String split = plan.split(null, id);
      perSplit.merge(split, 1, Integer::sum);
      ShardSlot slot = plan.slot(split, id);
      assertEquals(slot, plan.slot(split, id));
      assertEquals(split, plan.splitOf(slot.partition()));
      perShard[slot.partition()]++;
    }
    assertEquals(0.1, perSplit.get("val") / 20_000.0, 0.01, "val share by key hash");
    for (int count : perShard) {
      assertTrue(count > 0, "every shard gets samples");
    }
    assertEquals("val", plan.split("val", 1), "a source's own split wins");
    assertNull(
        ShardPlan.of(Map.of("train", 10L), options(0, 1, 0), 1, 12_288).slot("val", 5),
        "an empty split takes nothing");
  }
}
