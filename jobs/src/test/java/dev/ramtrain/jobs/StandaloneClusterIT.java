package dev.ramtrain.jobs;

import static dev.ramtrain.jobs.RunMetrics.epochs;
import static dev.ramtrain.jobs.RunMetrics.figure;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ramtrain on a real Spark standalone cluster (a Master and two 1-core Workers on 127.0.0.1, each
 * Worker with its own work directory), driven by bin/ramtrain through spark-submit with the
 * assembly jar, as a user on a cluster's edge node does.
 */
class StandaloneClusterIT {
  private static final Path ROOT = Path.of(System.getProperty("ramtrain.repo.root"));

  @TempDir static Path tmp;
  static StandaloneCluster cluster;
  static Path images;

  /** The images preprocessed on the cluster to 16x16, a fifth for validation. */
  static Path dataset;

  @BeforeAll
  static void startCluster() throws Exception {
    cluster = StandaloneCluster.start(tmp.resolve("cluster"), ROOT, 2);
    images = tmp.resolve("images");
    Result generated =
        ramtrain(
            false,
            "generate",
            "-o",
            images.toString(),
            "--classes",
            "3",
            "--images-per-class",
            "200",
            "--width",
            "32",
            "--height",
            "32");
    assertEquals(0, generated.status(), generated.output());
    dataset = tmp.resolve("dataset");
    Result preprocessed =
        ramtrain(
            true,
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            dataset.toString(),
            "--height",
            "16",
            "--width",
            "16",
            "--set",
            "ramtrain.etl.val-fraction=0.2");
    assertEquals(0, preprocessed.status(), preprocessed.output());
  }

  @AfterAll
  static void stopCluster() {
    if (cluster != null) {
      cluster.close();
    }
  }

  record Result(int status, String output) {}

  /** bin/ramtrain, on the cluster (SPARK_HOME set, spark-submit) or embedded. */
  private static Process start(Path log, boolean onCluster, List<String> args) throws IOException {
    List<String> command = new ArrayList<>(List.of(ROOT.resolve("bin/ramtrain").toString()));
    command.addAll(args);
    if (onCluster) {
      command.addAll(List.of("--master", cluster.masterUrl()));
      command.addAll(cluster.classArchiveConf());
    }
    ProcessBuilder pb =
        new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
    pb.environment().remove("SPARK_HOME");
    if (onCluster) {
      pb.environment().putAll(cluster.clientEnvironment());
    }
    return pb.start();
  }

  private static Result finish(Process p, Path log) throws Exception {
    assertTrue(p.waitFor(6, TimeUnit.MINUTES), "bin/ramtrain finished; output in " + log);
    cluster.applicationEnded();
    return new Result(p.exitValue(), Files.readString(log, StandardCharsets.UTF_8));
  }

  private static Result ramtrain(boolean onCluster, String... args) throws Exception {
    Path log = Files.createTempFile(tmp, "ramtrain-", ".log");
    return finish(start(log, onCluster, List.of(args)), log);
  }

  private static List<String> with(List<String> common, String... more) {
    List<String> all = new ArrayList<>(common);
    all.addAll(List.of(more));
    return all;
  }

  /**
   * On the dataset preprocessed on the cluster, {@code train} runs one rank per executor by itself
   * (two), which train a batch-norm CNN as one process accumulating their two half batches per step
   * does: the same trained weights bit for bit on any CPU (the same arithmetic, see
   * DataParallelTrainingTest, on as many OpenMP threads: bin/ramtrain gives the embedded run and
   * the executors one each, from ramtrain.train.threads=1), the same weights and buffers on both
   * ranks (rank 0's statistics), no stage retried. An executor killed mid-epoch is replaced, the
   * console says the stage runs again and why, and the run ends with the weights of the run that
   * was never interrupted, byte for byte. Every run writes its report.
   */
  @Test
  void twoRanksTrainAsOneProcessAndAKilledExecutorChangesNoWeight() throws Exception {
    List<String> train =
        List.of(
            "train",
            "-d",
            dataset.toString(),
            "--model",
            "cnn:cb8-p-cb16-p-f32-3",
            "--epochs",
            "4",
            "--set",
            "ramtrain.train.threads=1",
            "--set",
            "ramtrain.train.checkpoint-every=4",
            "--set",
            "ramtrain.train.keep-checkpoints=0"); // every epoch's, compared below
    Result one =
        ramtrain(
            false,
            with(
                    train,
                    "-o",
                    tmp.resolve("one").toString(),
                    "--batch-size",
                    "8",
                    "--accumulate",
                    "2")
                .toArray(String[]::new));
    assertEquals(0, one.status(), one.output());

    Set<Path> before = cluster.applications();
    Result two =
        ramtrain(
            true,
            with(train, "-o", tmp.resolve("two").toString(), "--batch-size", "16")
                .toArray(String[]::new));
    assertEquals(0, two.status(), two.output());
    assertTrue(
        two.output().contains("training with 2 ranks: one per executor (2 registered)"),
        two.output());
    assertTrue(two.output().contains("(2 ranks)"), two.output());
    assertFalse(two.output().contains("runs it again"), "no stage retried:\n" + two.output());
    assertTrue(Files.exists(tmp.resolve("two/report/index.html")), two.output());
    String ranks = cluster.executorStdout(before);
    assertFalse(ranks.contains("resuming from"), "no stage retried:\n" + ranks);
    assertEquals(2, digests(ranks, 2).size(), "both ranks report their final weights:\n" + ranks);
    assertEquals(1, new HashSet<>(digests(ranks, 2)).size(), "the same weights:\n" + ranks);

    for (String epoch : List.of("epoch-0001", "epoch-0004")) {
      RunMetrics.assertSameTrainedWeights(
          tmp.resolve("one/checkpoints").resolve(epoch),
          tmp.resolve("two/checkpoints").resolve(epoch));
    }
    List<String> epochsOne = epochs(tmp.resolve("one"));
    List<String> epochsTwo = epochs(tmp.resolve("two"));
    assertEquals(4, epochsTwo.size(), "rank 0 alone writes each epoch: " + epochsTwo);
    // The same float per-sample losses, summed in doubles in another order: within n·2^-52 of
    // each other, n the 480 train samples.
    for (int e = 0; e < 4; e++) {
      double a = figure(epochsOne.get(e), "train_loss");
      double b = figure(epochsTwo.get(e), "train_loss");
      assertEquals(a, b, 480 * 0x1p-52 * Math.abs(a), "train_loss of epoch " + (e + 1));
    }

    // The same run again; worker 1's executor is killed once a mid-epoch checkpoint is written.
    before = cluster.applications();
    Path killedRun = tmp.resolve("killed");
    Path log = tmp.resolve("killed.log");
    Process run = start(log, true, with(train, "-o", killedRun.toString(), "--batch-size", "16"));
    awaitStepCheckpoint(killedRun, run);
    List<ProcessHandle> executors = cluster.executors(1);
    assertEquals(1, executors.size(), "worker 1 runs one executor");
    assertTrue(executors.get(0).destroyForcibly(), "SIGKILL to worker 1's executor");
    Result killed = finish(run, log);
    assertEquals(0, killed.status(), killed.output());
    assertTrue(
        killed.output().contains("Spark runs it again (attempt 2), every rank resuming"),
        "the console says the stage runs again:\n" + killed.output());
    assertTrue(Files.exists(killedRun.resolve("report/index.html")), killed.output());
    String afterKill = cluster.executorStdout(before);
    assertTrue(afterKill.contains("resuming from"), afterKill);
    assertEquals(
        -1L,
        Files.mismatch(
            tmp.resolve("two/checkpoints/epoch-0004/model.safetensors"),
            killedRun.resolve("checkpoints/epoch-0004/model.safetensors")),
        "the killed run ends with the uninterrupted run's weights");
  }

  /**
   * Two Workers of two GPUs each (a discovery script of the test's own; the cpu backend's device
   * instances stand in for them): {@code train} runs one trainer task a node, each driving its
   * executor's two devices over one host copy, and the four ranks end with the trained weights of
   * two ranks that each accumulate two batches (what a node computes, see
   * DataParallelTrainingTest). An executor killed mid-epoch takes its node's two devices with it;
   * the stage runs again and ends with the uninterrupted run's weights, byte for byte.
   */
  @Test
  void twoNodesOfTwoDevicesShareAHostCopyEachAndSurviveAKilledExecutor() throws Exception {
    List<String> train =
        List.of(
            "train",
            "-d",
            dataset.toString(),
            "--model",
            "mlp:768-64-3",
            "--epochs",
            "1",
            "--set",
            "ramtrain.train.threads=1",
            "--set",
            "ramtrain.train.checkpoint-every=4",
            "--set",
            "ramtrain.train.keep-checkpoints=0");
    Result accumulating =
        ramtrain(
            true,
            with(
                    train,
                    "-o",
                    tmp.resolve("accumulating").toString(),
                    "--ranks",
                    "2",
                    "--batch-size", // a micro-batch of the two ranks: 16 samples a step
                    "8",
                    "--accumulate",
                    "2")
                .toArray(String[]::new));
    assertEquals(0, accumulating.status(), accumulating.output());

    // offloaded, as a node's devices share a host copy (and compute what resident ones do)
    // no --ranks: one node an executor, as many devices as its GPUs
    List<String> nodes = with(train, "--batch-size", "16", "--offload", "on");
    nodes.addAll(cluster.gpuConf());
    Set<Path> before = cluster.applications();
    Result shared =
        ramtrain(true, with(nodes, "-o", tmp.resolve("nodes").toString()).toArray(String[]::new));
    assertEquals(0, shared.status(), shared.output());
    assertTrue(
        shared.output().contains("training with 4 ranks: one node of 2 devices per executor"),
        shared.output());
    assertTrue(shared.output().contains("training on 2 nodes of 2 devices each"), shared.output());
    String ranks = cluster.executorStdout(before);
    assertEquals(4, digests(ranks, 4).size(), "every rank reports its final weights:\n" + ranks);
    assertEquals(1, new HashSet<>(digests(ranks, 4)).size(), "the same weights:\n" + ranks);
    assertTrue(ranks.contains("node           2 devices sharing one host copy (2 nodes)"), ranks);
    RunMetrics.assertSameTrainedWeights(
        tmp.resolve("accumulating/checkpoints/epoch-0001"),
        tmp.resolve("nodes/checkpoints/epoch-0001"));

    Path killedRun = tmp.resolve("nodes-killed");
    Path log = tmp.resolve("nodes-killed.log");
    Process run = start(log, true, with(nodes, "-o", killedRun.toString()));
    awaitStepCheckpoint(killedRun, run);
    List<ProcessHandle> executors = cluster.executors(1);
    assertEquals(1, executors.size(), "worker 1 runs one executor");
    assertTrue(executors.get(0).destroyForcibly(), "SIGKILL to worker 1's executor");
    Result killed = finish(run, log);
    assertEquals(0, killed.status(), killed.output());
    assertTrue(killed.output().contains("Spark runs it again (attempt 2)"), killed.output());
    assertEquals(
        -1L,
        Files.mismatch(
            tmp.resolve("nodes/checkpoints/epoch-0001/model.safetensors"),
            killedRun.resolve("checkpoints/epoch-0001/model.safetensors")),
        "the killed run ends with the uninterrupted run's weights");
  }

  /**
   * The pipeline on a cluster of two executors of two GPUs each: one trainer task a node drives its
   * executor's two devices over one host copy, each device on its rank's part of the shards its
   * executor cached (none read over the network; only what balances the nodes moves between them),
   * all four ending with the same weights.
   */
  @Test
  void pipelineNodesSplitTheirExecutorsShardsOverTheirDevices() throws Exception {
    Set<Path> before = cluster.applications();
    List<String> args =
        new ArrayList<>(
            List.of(
                pipeline(
                    "pipeline-nodes",
                    "--epochs",
                    "1",
                    "--offload",
                    "on",
                    "--set",
                    "ramtrain.train.threads=1")));
    args.addAll(cluster.gpuConf());
    Result r = ramtrain(true, args.toArray(String[]::new));
    assertEquals(0, r.status(), r.output());
    assertTrue(r.output().contains("training on 2 nodes of 2 devices each"), r.output());
    Matcher read =
        Pattern.compile("4 ranks read (\\d+\\.\\d) MB of shard blocks, (\\d+\\.\\d) MB")
            .matcher(r.output());
    assertTrue(read.find(), r.output());
    assertEquals("0.0", read.group(2), "no shard crossed the network: " + r.output());
    String ranks = cluster.executorStdout(before);
    assertEquals(4, digests(ranks, 4).size(), "every rank reports its final weights:\n" + ranks);
    assertEquals(1, new HashSet<>(digests(ranks, 4)).size(), "the same weights:\n" + ranks);
  }

  /**
   * --deploy-mode cluster: the driver runs on a Worker and trains there on an executor;
   * bin/ramtrain exits with how the driver ended (Spark's client exits 0 either way).
   */
  @Test
  void inClusterModeTheExitStatusIsTheDriversOutcome() throws Exception {
    List<String> train =
        List.of("train", "--model", "mlp:768-16-3", "--epochs", "1", "--deploy-mode", "cluster");
    Result ok =
        ramtrain(
            true,
            with(train, "-d", dataset.toString(), "-o", tmp.resolve("cluster-mode").toString())
                .toArray(String[]::new));
    assertEquals(0, ok.status(), ok.output());
    assertTrue(ok.output().contains("finished on the cluster"), ok.output());
    assertEquals(1, epochs(tmp.resolve("cluster-mode")).size());
    assertTrue(
        cluster.driverStdout().contains("(1 rank)"), "trained on an executor, not the driver");

    Result failed =
        ramtrain(
            true,
            with(train, "-d", tmp.resolve("missing").toString(), "-o", tmp.resolve("x").toString())
                .toArray(String[]::new));
    assertEquals(1, failed.status(), failed.output());
    assertTrue(failed.output().contains("ended FAILED on the cluster"), failed.output());
  }

  /**
   * {@code demo} on the cluster as a user runs it: generate, preprocess into executor memory, one
   * rank per executor training on the shards cached there (none read over the network, all ranks
   * ending with the same weights), the report written (uPlot found in the assembly jar, no build
   * metadata).
   */
  @Test
  void theDemoRunsOnTheClusterRanksOnTheirExecutorsShards() throws Exception {
    Path work = tmp.resolve("demo");
    Set<Path> before = cluster.applications();
    Result demo =
        ramtrain(
            true,
            "demo",
            "--workdir",
            work.toString(),
            "--images-per-class",
            "40",
            "--size",
            "16",
            "--epochs",
            "1",
            "--conf",
            "spark.scheduler.minRegisteredResourcesRatio=1.0");
    assertEquals(0, demo.status(), demo.output());
    assertTrue(demo.output().contains("dataset (in memory)"), demo.output());
    Matcher read =
        Pattern.compile("2 ranks read (\\d+\\.\\d) MB of shard blocks, (\\d+\\.\\d) MB")
            .matcher(demo.output());
    assertTrue(read.find(), demo.output());
    assertTrue(Double.parseDouble(read.group(1)) > 0, demo.output());
    assertEquals("0.0", read.group(2), "no shard crossed the network: " + demo.output());
    String ranks = cluster.executorStdout(before);
    assertEquals(2, digests(ranks, 2).size(), ranks);
    assertEquals(1, new HashSet<>(digests(ranks, 2)).size(), ranks);
    assertEquals(1, epochs(work.resolve("run")).size());
    Path page = work.resolve("run/report/index.html");
    assertTrue(Files.exists(page), demo.output());
    assertTrue(Files.readString(page).contains("uPlot"), "uPlot inlined in " + page);
  }

  /**
   * {@code pipeline} of the test images into run {@code output}, with {@code more}: both executors
   * registered before the ETL starts, so both cache shards.
   */
  private static String[] pipeline(String output, String... more) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "pipeline",
                "-i",
                images.toString(),
                "-o",
                tmp.resolve(output).toString(),
                "--height",
                "16",
                "--width",
                "16",
                "--model",
                "cnn:cb8-p-cb16-p-f32-3",
                "--batch-size",
                "16",
                "--conf",
                "spark.scheduler.minRegisteredResourcesRatio=1.0"));
    args.addAll(List.of(more));
    return args.toArray(String[]::new);
  }

  /** The weights' digests the ranks of a {@code world}-rank job printed, one a rank. */
  private static List<String> digests(String stdout, int world) {
    List<String> out = new ArrayList<>();
    Matcher m =
        Pattern.compile(
                "rank \\d+ of "
                    + world
                    + ": final weights identical on every rank \\((sha256:\\w+)\\)")
            .matcher(stdout);
    while (m.find()) {
      out.add(m.group(1));
    }
    return out;
  }

  /**
   * Waits until the run's latest checkpoint is a mid-epoch one (checkpoints/latest names it),
   * failing if the run ends first.
   */
  private static void awaitStepCheckpoint(Path runDir, Process run) throws Exception {
    Path latest = runDir.resolve("checkpoints/latest");
    Instant deadline = Instant.now().plus(Duration.ofMinutes(3));
    while (Instant.now().isBefore(deadline)) {
      if (Files.exists(latest) && Files.readString(latest).strip().startsWith("step-")) {
        return;
      }
      assertFalse(!run.isAlive(), "the run ended before its first step checkpoint");
      Thread.sleep(20);
    }
    throw new AssertionError("no step checkpoint in " + runDir + " within 3 minutes");
  }
}
