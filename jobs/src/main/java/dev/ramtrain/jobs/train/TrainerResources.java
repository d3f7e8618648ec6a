package dev.ramtrain.jobs.train;

import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.resource.ExecutorResourceRequests;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.resource.ResourceProfileBuilder;
import org.apache.spark.resource.TaskResourceRequests;

/**
 * What a trainer task asks Spark for on a GPU cluster: one GPU and all of its executor's cores, as
 * a stage-level resource profile on the trainer stage only, so the ETL's stages keep one core per
 * task. With dynamic allocation off, a task profile over the executors already there (Spark's
 * TaskResourceProfile); with it on, executors of that shape too.
 */
final class TrainerResources {
  static final String GPU = "gpu";

  private TrainerResources() {}

  /**
   * The trainer stage's profile for a cluster configured as {@code conf}, or null where executors
   * have no GPUs (or in local mode, which has no stage-level scheduling): then the stage takes what
   * every task takes.
   */
  static ResourceProfile profile(SparkConf conf) {
    double gpus = conf.getDouble("spark.executor.resource.gpu.amount", 0);
    if (gpus <= 0 || conf.get("spark.master", "").startsWith("local")) {
      return null;
    }
    int cores = conf.getInt("spark.executor.cores", 1);
    TaskResourceRequests task = new TaskResourceRequests().cpus(cores).resource(GPU, 1.0);
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
   * Fails unless the GPU Spark assigned this task ({@code resources}, the task's) is the device the
   * CUDA backend will drive, device 0 of those this process sees: Spark's addresses are the
   * discovery script's, and only executors isolated to their GPUs (YARN, Kubernetes, or one
   * executor per GPU with CUDA_VISIBLE_DEVICES) see their GPU as device 0.
   */
  static void requireDeviceZero(Map<String, ResourceInformation> resources, int rank) {
    ResourceInformation gpu = resources.get(GPU);
    if (gpu == null || gpu.addresses().length == 0) {
      return;
    }
    String address = gpu.addresses()[0];
    if (!address.equals("0")) {
      throw new IllegalStateException(
          "rank "
              + rank
              + " was assigned GPU "
              + address
              + ", and ramtrain's CUDA backend drives device 0 of the GPUs its process sees:"
              + " isolate each executor to its GPU (YARN, Kubernetes, or CUDA_VISIBLE_DEVICES per"
              + " executor) so that its GPU is device 0");
    }
  }
}
