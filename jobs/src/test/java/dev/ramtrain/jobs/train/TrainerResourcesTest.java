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

  /**
   * A node's devices: every rank locally, an executor's GPUs on a GPU cluster, one elsewhere; a
   * setting as given, refused where it does not divide the ranks; one under ZeRO when left auto.
   */
  @Test
  void aNodesDevicesAreTheExecutorsGpus() {
    TrainSettings.Dist auto = dist(4, TrainSettings.AUTO_DEVICES, 0);
    assertEquals(4, TrainerResources.devicesPerNode(auto, conf("spark.master", "local[4]")));
    assertEquals(
        2, TrainerResources.devicesPerNode(auto, conf("spark.executor.resource.gpu.amount", "2")));
    assertEquals(1, TrainerResources.devicesPerNode(auto, conf()));
    assertEquals(
        1, TrainerResources.devicesPerNode(dist(4, 0, 1), conf("spark.master", "local[4]")));
    assertEquals(2, TrainerResources.devicesPerNode(dist(4, 2, 0), conf()));
    assertEquals(2, TrainerResources.devicesPerNode(dist(4, 2, 1), conf()), "set: over nodes");
    var uneven =
        assertThrows(
            dev.ramtrain.settings.ConfigException.class,
            () -> TrainerResources.devicesPerNode(dist(4, 3, 0), conf()));
    assertTrue(uneven.getMessage().contains("devices-per-node = 3"), uneven.getMessage());
    // The trainer task of a node of two GPUs asks for both.
    ResourceProfile two =
        TrainerResources.profile(
            conf("spark.executor.resource.gpu.amount", "2", "spark.executor.cores", "8"), 2);
    assertEquals(2.0, two.taskResources().get("gpu").get().amount());
  }

  private static TrainSettings.Dist dist(int ranks, int devicesPerNode, int zero) {
    return new TrainSettings.Dist(
        ranks, java.time.Duration.ofMinutes(1), zero, false, -1, devicesPerNode);
  }

  /** Device d of a node drives the d-th GPU its task was assigned; too few assigned is refused. */
  @Test
  void aNodesDevicesTakeTheirTasksGpusInOrder() {
    var two = Map.of("gpu", new ResourceInformation("gpu", new String[] {"2", "3"}));
    Map<String, String> pci = Map.of("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    assertEquals(2, TrainerResources.cudaOrdinal(two, pci, 0, 0));
    assertEquals(3, TrainerResources.cudaOrdinal(two, pci, 2, 1));
    assertEquals(1, TrainerResources.cudaOrdinal(Map.of(), Map.of(), 1, 1), "none assigned");
    var tooFew =
        assertThrows(
            IllegalStateException.class, () -> TrainerResources.cudaOrdinal(gpu("0"), pci, 5, 1));
    assertTrue(tooFew.getMessage().startsWith("rank 5 is device 1"), tooFew.getMessage());
  }

  private static Map<String, ResourceInformation> gpu(String address) {
    return Map.of("gpu", new ResourceInformation("gpu", new String[] {address}));
  }

  @Test
  void theAssignedGpuBecomesTheCudaOrdinalTheProcessSeesItAs() {
    assertEquals(0, TrainerResources.cudaOrdinal(Map.of(), Map.of(), 0), "no GPU assigned");
    // No CUDA_VISIBLE_DEVICES: the address, when CUDA numbers GPUs in PCI order as nvidia-smi.
    assertEquals(0, TrainerResources.cudaOrdinal(gpu("0"), Map.of(), 0));
    assertEquals(
        3, TrainerResources.cudaOrdinal(gpu("3"), Map.of("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), 1));
    // CUDA_VISIBLE_DEVICES: the address's place in the list, or the one GPU an isolated
    // executor sees.
    assertEquals(
        1, TrainerResources.cudaOrdinal(gpu("5"), Map.of("CUDA_VISIBLE_DEVICES", "4, 5,6"), 0));
    assertEquals(
        0, TrainerResources.cudaOrdinal(gpu("2"), Map.of("CUDA_VISIBLE_DEVICES", "GPU-a1b2"), 0));

    var unordered =
        assertThrows(
            IllegalStateException.class, () -> TrainerResources.cudaOrdinal(gpu("3"), Map.of(), 1));
    assertTrue(
        unordered.getMessage().startsWith("rank 1 was assigned GPU 3"), unordered.getMessage());
    assertTrue(
        unordered.getMessage().contains("spark.executorEnv.CUDA_DEVICE_ORDER=PCI_BUS_ID"),
        unordered.getMessage());
    var notVisible =
        assertThrows(
            IllegalStateException.class,
            () -> TrainerResources.cudaOrdinal(gpu("7"), Map.of("CUDA_VISIBLE_DEVICES", "0,1"), 2));
    assertTrue(
        notVisible
            .getMessage()
            .contains("GPU 7, which is not among this executor's" + " CUDA_VISIBLE_DEVICES=0,1"),
        notVisible.getMessage());
    var uuid =
        assertThrows(
            IllegalStateException.class,
            () -> TrainerResources.cudaOrdinal(gpu("GPU-a1b2"), Map.of(), 0));
    assertTrue(uuid.getMessage().contains("must be a GPU index"), uuid.getMessage());
  }
}
