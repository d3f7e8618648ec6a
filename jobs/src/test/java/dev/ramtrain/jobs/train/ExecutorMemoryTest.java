package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.Learner;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.Stream;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.run.HostLimit;
import dev.ramtrain.trainer.run.Placement;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

/** An executor's rank plans with the memory its executor was given, as Spark sizes containers. */
class ExecutorMemoryTest {
  private static final long MIB = 1L << 20;

  private static SparkConf conf(String... pairs) {
    SparkConf conf = new SparkConf(false);
    for (int i = 0; i < pairs.length; i += 2) {
      conf.set(pairs[i], pairs[i + 1]);
    }
    return conf;
  }

  @Test
  void overheadAsSparkComputesItPlusEnabledOffHeap() {
    // 1g heap: the 384 MiB minimum; 8g: a tenth of the heap; set explicitly: that, in MiB.
    assertEquals(384 * MIB, ExecutorMemory.hostLimit(conf("spark.executor.memory", "1g")).bytes());
    assertEquals(
        (long) (0.1 * 8192 * MIB),
        ExecutorMemory.hostLimit(conf("spark.executor.memory", "8g")).bytes());
    assertEquals(
        2048 * MIB,
        ExecutorMemory.hostLimit(
                conf("spark.executor.memory", "8g", "spark.executor.memoryOverhead", "2g"))
            .bytes());
    assertEquals(
        (384 + 1024) * MIB,
        ExecutorMemory.hostLimit(
                conf("spark.memory.offHeap.enabled", "true", "spark.memory.offHeap.size", "1g"))
            .bytes());
    assertEquals(
        384 * MIB,
        ExecutorMemory.hostLimit(conf("spark.memory.offHeap.size", "1g")).bytes(),
        "disabled");
    HostLimit limit = ExecutorMemory.hostLimit(conf("spark.executor.memory", "1g"));
    assertEquals(100, limit.cap(100));
    assertEquals(384 * MIB, limit.cap(Long.MAX_VALUE));
    assertTrue(limit.binds(21L << 30) && !HostLimit.MACHINE.binds(21L << 30));
  }

  /**
   * On the CPU backend both the "device" and the pinned host slabs are the executor's memory beside
   * its heap: with 384 MiB a 29 M-parameter model (470 MB of weights, gradients and AdamW state) is
   * refused before anything is allocated, naming the key that raises the limit (the machine's free
   * memory would have let it start, and the container be killed).
   */
  @Test
  void anOffloadedRunThatExceedsTheExecutorsMemoryIsRefusedNamingTheKey() {
    RamtrainConfig c =
        RamtrainConfig.load(
            null,
            Map.of(),
            Map.of(
                "ramtrain.train.model", "mlp:3072-4096-4096-10",
                "ramtrain.offload.mode", "on",
                "ramtrain.train.batch-size", "8"));
    JobSpec spec = TrainSettings.read(c);
    try (Backend backend = new CpuBackend(1)) {
      var setup = backend.createStream("setup");
      ConfigException e =
          assertThrows(ConfigException.class, () -> inDefaultExecutor(spec, backend, setup));
      assertTrue(e.getMessage().contains("spark.executor.memoryOverhead"), e.getMessage());
      assertTrue(
          e.getMessage().contains("384.0 MiB") || e.getMessage().contains("384 MiB"),
          e.getMessage());
    }
  }

  /**
   * A small model fits Spark's default executor (1 GiB heap, 384 MiB beside it): the offload margin
   * meant for a GPU's driver would take all 384 MiB, so within an executor it is capped at a
   * quarter of the limit.
   */
  @Test
  void aSmallModelTrainsInADefaultExecutor() {
    RamtrainConfig c =
        RamtrainConfig.load(
            null,
            Map.of(),
            Map.of("ramtrain.train.model", "mlp:3072-64-10", "ramtrain.train.batch-size", "8"));
    JobSpec spec = TrainSettings.read(c);
    try (Backend backend = new CpuBackend(1)) {
      var setup = backend.createStream("setup");
      try (var learner = inDefaultExecutor(spec, backend, setup)) {
        assertEquals(3072 * 64 + 64 + 64 * 10 + 10, learner.parameterCount());
      }
    }
  }

  /** The learner for 32x32x3 images as a rank in an executor of Spark's defaults (1g heap). */
  private static Learner inDefaultExecutor(JobSpec spec, Backend backend, Stream setup) {
    return Placement.learner(
        spec.run(),
        new ImageShape(32, 32, 3),
        spec.run().loop(),
        backend,
        setup,
        DataParallel.single(),
        ExecutorMemory.hostLimit(conf("spark.executor.memory", "1g")));
  }
}
