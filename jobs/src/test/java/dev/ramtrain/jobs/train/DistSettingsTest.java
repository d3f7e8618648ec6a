package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.settings.ConfigException;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code ramtrain.dist.devices-per-node}: read and checked once, with what it cannot go with. */
class DistSettingsTest {
  private static TrainSettings.Dist dist(Map<String, String> set) {
    return TrainSettings.dist(RamtrainConfig.load(null, Map.of(), set));
  }

  @Test
  void devicesPerNodeIsAutoOrAPositiveCount() {
    assertEquals(TrainSettings.AUTO_DEVICES, dist(Map.of()).devicesPerNode());
    assertEquals(3, dist(Map.of("ramtrain.dist.devices-per-node", "3")).devicesPerNode());
    ConfigException zero =
        assertThrows(
            ConfigException.class, () -> dist(Map.of("ramtrain.dist.devices-per-node", "0")));
    assertTrue(zero.getMessage().contains("ramtrain.dist.devices-per-node"), zero.getMessage());
  }

  @Test
  void zeroWithASharedHostCopyPartitionsOverTheNodes() {
    TrainSettings.Dist d =
        dist(
            Map.of(
                "ramtrain.dist.devices-per-node", "2",
                "ramtrain.dist.zero", "2",
                "ramtrain.offload.mode", "on"));
    assertEquals(2, d.devicesPerNode());
    assertEquals(2, d.zero());
  }
}
