package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceProfile;
import org.junit.jupiter.api.Test;

class TrainerResourcesTest {
  private static SparkConf conf(String... pairs) {
    SparkConf conf = new SparkConf(false).set("spark.master", "spark://head:7077");
    for (int i = 0; i < pairs.length; i += 2) {
      conf.set(pairs[i], pairs[i + 1]);
    }
    return conf;
  }

  @Test
  void noProfileWithoutGpusOrInLocalMode() {
    assertNull(TrainerResources.profile(conf()));
    assertNull(
        TrainerResources.profile(
            conf("spark.master", "local[2]", "spark.executor.resource.gpu.amount", "1")));
  }

  @Test
  void aTrainerTaskTakesOneGpuAndAllOfItsExecutorsCores() {
    ResourceProfile fixed =
        TrainerResources.profile(
            conf("spark.executor.resource.gpu.amount", "1", "spark.executor.cores", "8"));
    assertEquals(8, fixed.taskResources().get("cpus").get().amount());
    assertEquals(1.0, fixed.taskResources().get("gpu").get().amount());
    assertTrue(fixed.executorResources().isEmpty(), "over the executors already there");

    ResourceProfile elastic =
        TrainerResources.profile(
            conf(
                "spark.executor.resource.gpu.amount", "1",
                "spark.executor.cores", "8",
                "spark.dynamicAllocation.enabled", "true",
                "spark.executor.resource.gpu.discoveryScript", "/opt/spark/getGpus.sh"));
    assertEquals(8, elastic.executorResources().get("cores").get().amount());
    assertEquals(1, elastic.executorResources().get("gpu").get().amount());
    assertEquals(
        "/opt/spark/getGpus.sh", elastic.executorResources().get("gpu").get().discoveryScript());
  }

  @Test
  void aGpuOtherThanDeviceZeroIsRefusedNamingRankAndAddress() {
    TrainerResources.requireDeviceZero(Map.of(), 0);
    TrainerResources.requireDeviceZero(
        Map.of("gpu", new ResourceInformation("gpu", new String[] {"0"})), 0);
    var e =
        assertThrows(
            IllegalStateException.class,
            () ->
                TrainerResources.requireDeviceZero(
                    Map.of("gpu", new ResourceInformation("gpu", new String[] {"3"})), 1));
    assertTrue(e.getMessage().startsWith("rank 1 was assigned GPU 3"), e.getMessage());
  }
}
