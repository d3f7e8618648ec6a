package dev.ramtrain.jobs.train;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.resource.ExecutorResourceRequests;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.resource.ResourceProfileBuilder;
import org.apache.spark.resource.TaskResourceRequests;

/**
 * What a trainer task asks Spark for on a GPU cluster, and which GPU it then drives: one GPU and
 * all of its executor's cores, as a stage-level resource profile on the trainer stage only, so the
 * ETL's stages keep one core per task. With dynamic allocation off, a task profile over the
 * executors already there (Spark's TaskResourceProfile); with it on, executors of that shape too.
 */
public final class TrainerResources {
  static final String GPU = "gpu";

  private TrainerResources() {}

  /**
   * A cluster's devices a node as {@code dist} sets them, or (auto) its executors' GPUs (one
   * without GPUs); auto under ZeRO is one, partitioning over every rank in either placement (a set
   * count partitions over the nodes, whose devices offload from one host copy).
   */
  public static int clusterDevicesPerNode(TrainSettings.Dist dist, SparkConf conf) {
    double gpus = conf.getDouble("spark.executor.resource.gpu.amount", 0);
    int devices = dist.devicesPerNodeOr(gpus >= 1 ? (int) Math.floor(gpus) : 1);
    return dist.zero() > 0 && dist.devicesPerNode() == TrainSettings.AUTO_DEVICES ? 1 : devices;
  }

  /**
   * The devices of a node (ranks a trainer task drives in one JVM) for {@code dist} on a cluster
   * configured as {@code conf}: as set, or (auto) every rank in local mode, the GPUs of an executor
   * on a GPU cluster, one elsewhere. It must divide the ranks.
   */
  static int devicesPerNode(TrainSettings.Dist dist, SparkConf conf) {
    boolean local = conf.get("spark.master", "").startsWith("local");
    int devices = local ? dist.devicesPerNodeOr(dist.ranks()) : clusterDevicesPerNode(dist, conf);
    if (dist.ranks() % devices != 0) {
      throw new dev.ramtrain.settings.ConfigException(
          String.format(
              "ramtrain.dist.devices-per-node = %d does not divide ramtrain.dist.ranks = %d",
              devices, dist.ranks()));
    }
    if (devices > 1 && dist.zero() > 0 && dist.devicesPerNode() == TrainSettings.AUTO_DEVICES) {
      return 1; // auto under ZeRO: every rank its own share, resident or offloaded
    }
    return devices;
  }

  /**
   * The trainer stage's profile for a cluster configured as {@code conf}, or null where executors
   * have no GPUs (or in local mode, which has no stage-level scheduling): then the stage takes what
   * every task takes.
   */
  static ResourceProfile profile(SparkConf conf) {
    return profile(conf, 1);
  }

  /**
   * As above, for trainer tasks that each drive {@code devices} GPUs (a node's, one executor's).
   */
  static ResourceProfile profile(SparkConf conf, int devices) {
    double gpus = conf.getDouble("spark.executor.resource.gpu.amount", 0);
    if (gpus <= 0 || conf.get("spark.master", "").startsWith("local")) {
      return null;
    }
    int cores = conf.getInt("spark.executor.cores", 1);
    TaskResourceRequests task = new TaskResourceRequests().cpus(cores).resource(GPU, devices);
    ResourceProfileBuilder profile = new ResourceProfileBuilder().require(task);
    if (conf.getBoolean("spark.dynamicAllocation.enabled", false)) {
      ExecutorResourceRequests executor =
          new ExecutorResourceRequests()
              .cores(cores)
              .memory(conf.get("spark.executor.memory", "1g"))
              .resource(
                  GPU,
                  (long) Math.ceil(gpus),
                  conf.get("spark.executor.resource.gpu.discoveryScript", ""),
                  conf.get("spark.executor.resource.gpu.vendor", ""));
      profile.require(executor);
    }
    return profile.build();
  }

  /**
   * The CUDA ordinal of the GPU Spark assigned this task ({@code resources}, the task's), in a
   * process whose environment is {@code env}; 0 where none was assigned. Spark's addresses are its
   * discovery script's, which numbers GPUs as nvidia-smi does (PCI bus order):
   *
   * <ul>
   *   <li>with {@code CUDA_VISIBLE_DEVICES} the process sees only those GPUs, in that order: the
   *       address's position in the list, or 0 when the list holds one GPU (an executor isolated to
   *       its GPU, as on YARN and Kubernetes, whose discovery may number it otherwise);
   *   <li>without it the address is the ordinal, provided CUDA numbers GPUs as nvidia-smi does
   *       ({@code CUDA_DEVICE_ORDER=PCI_BUS_ID}; CUDA's default puts the fastest first); address 0
   *       of a machine with one GPU needs no order.
   * </ul>
   *
   * Anything else fails at start, naming the rank, the address and what to set.
   */
  static int cudaOrdinal(
      Map<String, ResourceInformation> resources, Map<String, String> env, int rank) {
    return cudaOrdinal(resources, env, rank, 0);
  }

  /**
   * As above, for the {@code index}-th of the GPUs assigned to a task that drives several (its
   * node's devices, {@code rank} the index-th's rank): the addresses in Spark's order; one where a
   * task was assigned fewer GPUs than it drives fails at start, naming the rank.
   */
  static int cudaOrdinal(
      Map<String, ResourceInformation> resources, Map<String, String> env, int rank, int index) {
    ResourceInformation gpu = resources.get(GPU);
    if (gpu == null || gpu.addresses().length == 0) {
      return index;
    }
    if (index >= gpu.addresses().length) {
      throw new IllegalStateException(
          String.format(
              "rank %d is device %d of its node, and its task was assigned %d GPUs (%s)",
              rank, index, gpu.addresses().length, String.join(",", gpu.addresses())));
    }
    String address = gpu.addresses()[index].strip();
    String visible = env.getOrDefault("CUDA_VISIBLE_DEVICES", "").strip();
    if (!visible.isEmpty()) {
      List<String> listed = Arrays.stream(visible.split(",")).map(String::strip).toList();
      int position = listed.indexOf(address);
      if (position >= 0) {
        return position;
      }
      if (listed.size() == 1 && index == 0) {
        return 0;
      }
      throw new IllegalStateException(
          String.format(
              "rank %d was assigned GPU %s, which is not among this executor's"
                  + " CUDA_VISIBLE_DEVICES=%s",
              rank, address, visible));
    }
    int ordinal;
    try {
      ordinal = Integer.parseInt(address);
    } catch (NumberFormatException e) {
      throw new IllegalStateException(
          String.format(
              "rank %d was assigned GPU '%s': without CUDA_VISIBLE_DEVICES the address must be a"
                  + " GPU index as nvidia-smi numbers them",
              rank, address));
    }
    if (ordinal != 0 && !"PCI_BUS_ID".equals(env.get("CUDA_DEVICE_ORDER"))) {
      throw new IllegalStateException(
          String.format(
              "rank %d was assigned GPU %s, numbered as nvidia-smi does; set"
                  + " spark.executorEnv.CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA numbers GPUs the"
                  + " same way (its default puts the fastest first)",
              rank, address));
    }
    return ordinal;
  }
}
