package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.dataset.HadoopConf;
import dev.ramtrain.etl.spark.LiveProgress;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.dist.DataParallel;
import dev.ramtrain.trainer.dist.NodeExchange;
import dev.ramtrain.trainer.dist.NodeStoppedException;
import dev.ramtrain.trainer.dist.RanksDivergedException;
import dev.ramtrain.trainer.dist.TcpRing;
import dev.ramtrain.trainer.offload.DeviceGroup;
import dev.ramtrain.trainer.run.HostLimit;
import dev.ramtrain.trainer.run.RankContext;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.ExceptionFailure;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.LongAccumulator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Trains with data-parallel ranks: a Spark barrier stage of one task per rank (Spark starts them
 * together and fails them together). Each task joins the job's TCP rings ({@link DataParallel})
 * through addresses and a secret exchanged with {@link BarrierTaskContext#allGather}, opens what
 * its {@link RankInputs} give it (every shard of a committed dataset, or the in-memory shards of
 * its partition) and trains on its share of each global batch; rank 0 owns the run directory.
 *
 * <p>The secret is made by rank 0 and travels over Spark's barrier RPC, which Spark authenticates
 * and encrypts when the cluster sets {@code spark.authenticate} and {@code
 * spark.network.crypto.enabled}.
 *
 * @param <T> the records of the stage's input partitions, one partition per rank
 */
public final class DistributedTraining<T>
    extends AbstractFunction1<Iterator<T>, Iterator<EvalResult>> implements Serializable {
  private static final Logger LOG = LoggerFactory.getLogger(DistributedTraining.class);
  private static final String JOB_KEY = "dist_job";

  private final JobSpec spec;
  private final int world;
  private final int devicesPerNode; // ranks a task drives in its JVM, sharing one host copy
  private final TrainSettings.Dist dist;
  private final String job; // names this job's checkpoints: a retried stage resumes only from those
  private final LongAccumulator progressSteps; // rank 0's steps run, for the driver's line
  private final LongAccumulator progressTotal; // and the steps it has to run

  private final RankInputs<T> inputs;
  private final HadoopConf hadoop; // the driver's: run directories on HDFS, S3A, ...

  private DistributedTraining(
      JobSpec spec,
      TrainSettings.Dist dist,
      RankInputs<T> inputs,
      HadoopConf hadoop,
      String job,
      LongAccumulator progressSteps,
      LongAccumulator progressTotal) {
    this.spec = spec;
    this.hadoop = hadoop;
    this.world = dist.ranks();
    this.devicesPerNode = dist.devicesPerNodeOr(1);
    this.dist = dist;
    this.inputs = inputs;
    this.job = job;
    this.progressSteps = progressSteps;
    this.progressTotal = progressTotal;
  }

  /**
   * Trains the ranks {@code dist} asks for as {@code spec} says, each opening every shard of the
   * committed dataset as {@code manifest} (the version the driver holds) describes it; the
   * evaluation over all of them.
   */
  public static EvalResult run(
      SparkSession spark, JobSpec spec, TrainSettings.Dist dist, Manifest manifest)
      throws IOException {
    int world = dist.ranks();
    dist =
        dist.withDevicesPerNode(
            TrainerResources.devicesPerNode(dist, spark.sparkContext().getConf()));
    // One task a node: its partition is the node's number (a rank's own, with one device a node).
    int nodes = world / dist.devicesPerNode();
    List<Integer> tasks = IntStream.range(0, nodes).boxed().toList();
    RDD<Integer> slots = new JavaSparkContext(spark.sparkContext()).parallelize(tasks, nodes).rdd();
    Configuration conf = spark.sparkContext().hadoopConfiguration();
    ShardAssignment assignment = null;
    long trainPerEpoch = 0;
    if (dist.ownShards()) {
      spec.run().forRank(0, world); // an uneven batch split is refused first, as the stage does
      assignment = ShardAssignment.of(manifest, world);
      assignment.requireABatchPerRank(spec.run().batchSize());
      boolean pad = spec.run().data().train().sampling().remainder() == LoaderSpec.Remainder.PAD;
      trainPerEpoch = assignment.trainPerEpoch(pad);
    }
    DatasetRanks inputs =
        new DatasetRanks(new HadoopConf(conf), manifest, assignment, trainPerEpoch);
    return run(slots, inputs, spec, dist, "data-parallel ranks");
  }

  /**
   * Trains the ranks of {@code dist} in a barrier stage over {@code onePartitionPerRank}, each rank
   * opening its partition through {@code inputs}; the evaluation over all ranks. With several
   * devices a node ({@code dist.devicesPerNode()}, resolved) the partitions are the nodes', one
   * task driving each node's devices, each device opening its rank's part of the node's partition
   * ({@link RankInputs#ofRank}: none for a dataset, whose ranks open its shards themselves).
   */
  static <T> EvalResult run(
      RDD<T> onePartitionPerRank,
      RankInputs<T> inputs,
      JobSpec spec,
      TrainSettings.Dist dist,
      String what) {
    int world = dist.ranks();
    int devices = dist.devicesPerNodeOr(1);
    int nodes = world / devices;
    SparkContext sc = onePartitionPerRank.context();
    if (sc.isLocal() && nodes > sc.defaultParallelism()) {
      throw new ConfigException(
          String.format(
              "ramtrain.dist.ranks = %d: a barrier stage runs all its tasks at once, and %s has"
                  + " %d task slots",
              world, sc.master(), sc.defaultParallelism()));
    }
    if (onePartitionPerRank.getNumPartitions() != nodes) {
      throw new IllegalArgumentException(
          onePartitionPerRank.getNumPartitions() + " input partitions for " + nodes + " nodes");
    }
    spec.run().forRank(0, world); // an uneven batch split is a usage error before anything starts
    LongAccumulator steps = sc.longAccumulator("ramtrain.train.steps");
    LongAccumulator total = sc.longAccumulator("ramtrain.train.steps-to-run");
    DistributedTraining<T> rank =
        new DistributedTraining<>(
            spec,
            dist,
            inputs,
            new HadoopConf(sc.hadoopConfiguration()),
            UUID.randomUUID().toString(),
            steps,
            total);
    RDD<EvalResult> trained =
        onePartitionPerRank
            .barrier()
            .mapPartitions(rank, false, ClassTag$.MODULE$.apply(EvalResult.class));
    // On a GPU cluster the trainer stage takes one GPU and all of an executor's cores; the ETL's
    // stages keep their one core per task.
    ResourceProfile profile = TrainerResources.profile(sc.getConf(), devices);
    if (profile != null) {
      trained = trained.withResources(profile);
    }
    sc.setJobDescription(
        "ramtrain train: "
            + world
            + " "
            + what
            + " on "
            + nodes(nodes, devices)
            + " (barrier stage)");
    System.out.printf(
        "training on %s%s%n", nodes(nodes, devices), zero(dist.zero(), nodes, devices));
    FirstTaskFailure failure = new FirstTaskFailure(sc);
    sc.addSparkListener(failure);
    List<EvalResult> results;
    // In local mode rank 0's own line is on this console; on a cluster it is on an executor's.
    try (LiveProgress progress = sc.isLocal() ? null : TrainingProgress.start(sc, steps, total)) {
      // Through a shuffle: Spark retries a failed barrier stage only if it is a map stage (a
      // barrier result stage is aborted), and a retried stage resumes from the last checkpoint.
      results = trained.toJavaRDD().repartition(1).collect();
    } catch (Exception e) { // Spark's SparkException, which Java cannot name here
      throw failure.explain(e);
    } finally {
      sc.removeSparkListener(failure);
      sc.setJobDescription(null);
    }
    if (results.size() != 1) {
      throw new IllegalStateException("expected rank 0's evaluation, got " + results.size());
    }
    return results.get(0);
  }

  /** "1 node of 1 device", "2 nodes of 2 devices each". */
  /**
   * What ZeRO stage {@code stage} splits over {@code nodes} of {@code devices} (a node's devices
   * share one host copy, so the shares are the nodes'), or nothing without ZeRO.
   */
  static String zero(int stage, int nodes, int devices) {
    return stage == 0
        ? ""
        : String.format(
            ", ZeRO-%d: each %s keeps the optimizer state%s of its 1/%d share",
            stage,
            devices == 1 ? "rank" : "node",
            stage == 2 ? " and reduced gradients" : "",
            nodes);
  }

  static String nodes(int nodes, int devices) {
    return nodes == 1
        ? "1 node of " + (devices == 1 ? "1 device" : devices + " devices")
        : nodes + " nodes of " + (devices == 1 ? "1 device" : devices + " devices") + " each";
  }

  /**
   * One task: a rank (one device a node) or a node's devices, which join the others, train, and
   * (rank 0) hand back the evaluation.
   */
  @Override
  public Iterator<EvalResult> apply(Iterator<T> partition) {
    BarrierTaskContext task = BarrierTaskContext.get();
    EvalResult eval =
        devicesPerNode == 1
            ? oneRank(task, CollectionConverters.asJava(partition))
            : oneNode(task, CollectionConverters.asJava(partition));
    return CollectionConverters.asScala(
        (eval != null ? List.of(eval) : List.<EvalResult>of()).iterator());
  }

  /** The task of a rank that is its node's only device; its evaluation if it is rank 0. */
  private EvalResult oneRank(BarrierTaskContext task, java.util.Iterator<T> input) {
    int rank = task.partitionId();
    try (ServerSocketChannel listener = TcpRing.listen(InetAddress.getByName(host(task, rank)));
        DataParallel ranks = join(task, rank, listener)) {
      EvalResult eval =
          train(task, ranks, cudaOrdinal(task, rank, 0), input, null, task::barrier, task::barrier);
      return rank == 0 ? eval : null;
    } catch (IOException e) {
      throw new UncheckedIOException(e.getMessage(), e); // the driver names the rank
    }
  }

  /** The GPU of the {@code index}-th device of this task, as a CUDA ordinal (none on the CPU). */
  private int cudaOrdinal(BarrierTaskContext task, int rank, int index) {
    return spec.run().backend().kind() == BackendSpec.Kind.CPU
        ? 0
        : TrainerResources.cudaOrdinal(task.resourcesJMap(), System.getenv(), rank, index);
  }

  /**
   * The task of node {@code task.partitionId()}: its devices' ranks (device d of node n is rank d *
   * nodes + n, {@link DataParallel#join}) as threads of this task, over one {@link NodeExchange}
   * and one {@link DeviceGroup}, rank 0's evaluation if it holds rank 0. The first rank to fail
   * aborts the node's exchange, so that its other devices fail at once, not at the timeout; the
   * task fails with that rank's error.
   */
  private EvalResult oneNode(BarrierTaskContext task, java.util.Iterator<T> partition) {
    int node = task.partitionId();
    List<T> records = new ArrayList<>(); // the node's; each device takes its rank's (inputs.ofRank)
    partition.forEachRemaining(records::add);
    int nodes = world / devicesPerNode;
    List<ServerSocketChannel> listeners = new ArrayList<>();
    ExecutorService threads =
        Executors.newFixedThreadPool(
            devicesPerNode,
            r -> {
              Thread t = new Thread(r, "ramtrain-node-" + node + "-device");
              t.setDaemon(true);
              return t;
            });
    try {
      InetAddress host = InetAddress.getByName(host(task, node));
      StringBuilder message = new StringBuilder();
      for (int d = 0; d < devicesPerNode; d++) {
        listeners.add(TcpRing.listen(host));
        InetSocketAddress mine = (InetSocketAddress) listeners.get(d).getLocalAddress();
        message.append(d == 0 ? "" : ",").append(mine.getHostString()).append(' ');
        message.append(mine.getPort());
      }
      if (node == 0) {
        byte[] secret = new byte[32];
        new SecureRandom().nextBytes(secret);
        message.append(';').append(Base64.getEncoder().encodeToString(secret));
      }
      String[] all = task.allGather(message.toString());
      InetSocketAddress[] addresses = new InetSocketAddress[world];
      for (int n = 0; n < nodes; n++) {
        String[] devices = all[n].split(";")[0].split(",");
        for (int d = 0; d < devicesPerNode; d++) {
          String[] parts = devices[d].split(" ");
          addresses[d * nodes + n] = new InetSocketAddress(parts[0], Integer.parseInt(parts[1]));
        }
      }
      byte[] secret = Base64.getDecoder().decode(all[0].split(";")[1]);
      NodeExchange exchange = new NodeExchange(devicesPerNode, dist.timeout());
      DeviceGroup group = new DeviceGroup(devicesPerNode, dist.timeout());
      // Rank 0 opens the run directory before any task passes the barrier; the task's other
      // devices wait for the barrier as one-device tasks do.
      CompletableFuture<Void> directoryOpen = new CompletableFuture<>();
      if (node != 0) {
        directoryOpen.complete(null);
      }
      CompletableFuture<Void> settled = new CompletableFuture<>();
      ExecutorCompletionService<EvalResult> done = new ExecutorCompletionService<>(threads);
      AtomicReference<Exception> rootCause = new AtomicReference<>(); // the first rank to fail
      List<Future<EvalResult>> running = new ArrayList<>();
      for (int d = 0; d < devicesPerNode; d++) {
        int device = d;
        int rank = d * nodes + node;
        running.add(
            done.submit(
                () -> {
                  try (DataParallel ranks =
                      DataParallel.join(
                          rank,
                          List.of(addresses),
                          listeners.get(device),
                          secret,
                          dist.timeout(),
                          dist.zero(),
                          exchange)) {
                    return train(
                        task,
                        ranks,
                        cudaOrdinal(task, rank, device),
                        inputs.ofRank(records, rank),
                        group,
                        () -> {
                          directoryOpen.complete(null);
                          settled.join();
                        },
                        settled::join);
                  } catch (Throwable e) {
                    Exception mine = named(rank, e);
                    if (!NodeStoppedException.within(e)) { // a device that failed for itself
                      rootCause.compareAndSet(null, mine);
                    }
                    directoryOpen.completeExceptionally(e);
                    settled.completeExceptionally(e);
                    exchange.abort(e);
                    group.abort(e);
                    throw mine;
                  }
                }));
      }
      try {
        directoryOpen.join();
        task.barrier();
        settled.complete(null);
      } catch (RuntimeException e) {
        settled.completeExceptionally(e); // the rank that failed is reported below
      }
      EvalResult eval = null;
      Throwable first = null;
      for (int i = 0; i < devicesPerNode; i++) {
        try {
          Future<EvalResult> finished = done.take();
          EvalResult result = finished.get();
          if (running.indexOf(finished) == 0 && node == 0) {
            eval = result;
          }
        } catch (ExecutionException e) {
          first = first == null ? e.getCause() : first;
        }
      }
      if (first != null) {
        Throwable cause = rootCause.get() != null ? rootCause.get() : first;
        throw cause instanceof RuntimeException unchecked
            ? unchecked
            : new IllegalStateException(cause.getMessage(), cause);
      }
      return eval;
    } catch (IOException e) {
      throw new UncheckedIOException(e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("node " + node + ": interrupted", e);
    } finally {
      threads.shutdownNow();
      for (ServerSocketChannel listener : listeners) {
        try {
          listener.close();
        } catch (IOException e) {
          LOG.debug("closing a node's listener", e);
        }
      }
    }
  }

  /**
   * {@code e} as the task reports a node's rank's failure: its message starting with the rank (the
   * driver names the task's node otherwise); a usage error or diverged ranks keep their class,
   * which ends the job at once.
   */
  private static Exception named(int rank, Throwable e) {
    String message = String.valueOf(e.getMessage());
    if (e instanceof ConfigException || e instanceof RanksDivergedException) {
      return (Exception) e;
    }
    boolean named =
        message.startsWith("rank " + rank + ":") || message.startsWith("rank " + rank + " ");
    return new IllegalStateException(named ? message : "rank " + rank + ": " + message, e);
  }

  private DataParallel join(BarrierTaskContext task, int rank, ServerSocketChannel listener)
      throws IOException {
    InetSocketAddress mine = (InetSocketAddress) listener.getLocalAddress();
    String message = mine.getHostString() + " " + mine.getPort();
    if (rank == 0) {
      byte[] secret = new byte[32];
      new SecureRandom().nextBytes(secret);
      message += " " + Base64.getEncoder().encodeToString(secret);
    }
    String[] all = task.allGather(message);
    List<InetSocketAddress> addresses = new ArrayList<>();
    for (String member : all) {
      String[] parts = member.split(" ");
      addresses.add(new InetSocketAddress(parts[0], Integer.parseInt(parts[1])));
    }
    byte[] secret = Base64.getDecoder().decode(all[0].split(" ")[2]);
    return DataParallel.join(rank, addresses, listener, secret, dist.timeout(), dist.zero());
  }

  /**
   * Trains rank {@code ranks.rank()} on CUDA device {@code device} (of {@code node}'s, null: its
   * node's only one); rank 0 calls {@code directoryOpen} once it holds the run directory, the
   * others {@code awaitDirectory} before they read its checkpoint (the stage's barrier).
   */
  private EvalResult train(
      BarrierTaskContext task,
      DataParallel ranks,
      int device,
      java.util.Iterator<T> input,
      DeviceGroup node,
      Runnable directoryOpen,
      Runnable awaitDirectory)
      throws IOException {
    JobSpec.Output output = task.stageAttemptNumber() == 0 ? spec.output() : afterFailure();
    RankContext.StepListener steps = stepListener(task, ranks.rank());
    try (RankInputs.Opened opened = inputs.open(spec, ranks.rank(), world, input)) {
      JobSpec mine = opened.spec().withOutput(output);
      mine = mine.withRun(mine.run().withBackend(spec.run().backend().onDevice(device)));
      if (ranks.leader()) {
        // A remote run directory (HDFS, S3A): the run trains into a local copy that publishes
        // each checkpoint there.
        try (RemoteRun remote = output.remote() ? RemoteRun.open(output, hadoop.get(), job) : null;
            RunDirectory run =
                RunDirectory.open(
                    remote != null ? remote.staging() : output.path(),
                    output.mode(),
                    output.keepCheckpoints())) {
          if (remote != null) {
            run.afterEachCheckpoint(remote);
          }
          run.recordInCheckpoints(Map.of(JOB_KEY, job));
          directoryOpen.run(); // the run directory is settled: the others may read its checkpoint
          return TrainingRun.run(
              mine,
              opened.data(),
              run,
              new RankContext(ranks, steps, hostLimit(), !local(), node),
              null);
        }
      }
      awaitDirectory.run();
      Checkpoints.Loaded resumeFrom =
          output.mode() == RunDirectory.Mode.RESUME ? latestCheckpoint(output) : null;
      return TrainingRun.run(
          mine,
          opened.data(),
          null,
          new RankContext(ranks, steps, hostLimit(), !local(), node),
          resumeFrom);
    }
  }

  /**
   * How a retried stage opens the run directory: resuming from the latest checkpoint if this job
   * wrote it (its state.json names the job), else as the first attempt did. A checkpoint of another
   * run is never taken over. A new run (mode FRESH) that failed before its first checkpoint starts
   * again over what it wrote: its first attempt found no run there and held the directory's lock
   * since, so the run files there are its own; they are moved aside (OVERWRITE) and deleted once
   * the retry has saved its first checkpoint.
   */
  private JobSpec.Output afterFailure() throws IOException {
    JobSpec.Output output = spec.output();
    Map<String, Object> latest =
        output.remote()
            ? RemoteRun.readLatest(output, hadoop.get(), Checkpoints::latestState)
            : localLatestState();
    if (latest == null) {
      // A remote run's retry clears what its own first attempt published (RemoteRun's job marker).
      return output.mode() == RunDirectory.Mode.FRESH && !output.remote()
          ? output.in(RunDirectory.Mode.OVERWRITE)
          : output;
    }
    return job.equals(latest.get(JOB_KEY)) ? output.in(RunDirectory.Mode.RESUME) : output;
  }

  private Map<String, Object> localLatestState() throws IOException {
    Path dir = spec.output().path().toAbsolutePath().normalize();
    return Files.exists(dir.resolve("checkpoints").resolve(Checkpoints.LATEST))
        ? Checkpoints.latestState(dir)
        : null;
  }

  /** The run's latest checkpoint, read where the run directory is. */
  private Checkpoints.Loaded latestCheckpoint(JobSpec.Output output) throws IOException {
    if (!output.remote()) {
      return Checkpoints.loadLatest(output.path().toAbsolutePath().normalize());
    }
    Checkpoints.Loaded latest =
        RemoteRun.readLatest( // read whole: the local copy is deleted once read
            output, hadoop.get(), dir -> Checkpoints.loadLatest(dir).inMemory());
    if (latest == null) {
      throw new IOException(output.dir() + " has no checkpoint to resume from");
    }
    return latest;
  }

  /**
   * Rank 0 counts its steps into the driver's progress accumulators; every rank stops after a step
   * when its task was killed; the last rank fails once if a recovery test asks it to ({@code
   * ramtrain.dist.fail-once-at-step}, first attempt only).
   */
  private RankContext.StepListener stepListener(BarrierTaskContext task, int rank) {
    boolean counts = rank == 0;
    long failAt = rank == world - 1 && task.stageAttemptNumber() == 0 ? dist.failOnceAtStep() : -1;
    return new RankContext.StepListener() {
      @Override
      public void starting(long stepsToRun) {
        if (counts) {
          progressTotal.add(stepsToRun);
        }
      }

      @Override
      public void done(long stepsDone) {
        // A cancelled job (the Spark UI's kill, a notebook's Training.cancel) interrupts its tasks;
        // the loop never waits where an interrupt reaches it, so it stops here, after a step.
        task.killTaskIfInterrupted();
        if (counts) {
          progressSteps.add(1);
        }
        if (stepsDone == failAt) {
          throw new IllegalStateException(
              "rank "
                  + rank
                  + " fails after step "
                  + stepsDone
                  + " on purpose (ramtrain.dist.fail-once-at-step)");
        }
      }
    };
  }

  /**
   * The first trainer task's failure as that task saw it: Spark fails a barrier stage with "barrier
   * task ... finished unsuccessfully", naming no cause. The first task to fail is the cause; the
   * others fail after it, when its connections close. A failure that every attempt would meet (a
   * usage error, ranks that diverged) ends the job at once; any other lets Spark run the stage
   * again, which the console is told, with the failure that caused it.
   */
  private static final class FirstTaskFailure extends SparkListener {
    private static final Set<String> FINAL =
        Set.of(ConfigException.class.getName(), RanksDivergedException.class.getName());

    private final SparkContext sc;
    private final CountDownLatch seen = new CountDownLatch(1);
    private volatile ExceptionFailure first;
    private volatile int rank;
    private volatile String latest; // the first failure of the latest attempt, for the console

    FirstTaskFailure(SparkContext sc) {
      this.sc = sc;
    }

    @Override
    public void onTaskEnd(SparkListenerTaskEnd end) {
      if (!(end.reason() instanceof ExceptionFailure failure)) {
        return;
      }
      int failed = end.taskInfo().partitionId();
      if (latest == null) {
        latest = describe(failed, failure.description());
      }
      if (first == null) {
        rank = failed;
        first = failure;
        seen.countDown();
        if (FINAL.contains(failure.className())) {
          // Every attempt would fail alike: end the job instead of retrying the stage.
          sc.cancelStage(end.stageId(), describe(rank, failure.description()));
        }
      }
    }

    @Override
    public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
      int attempt = submitted.stageInfo().attemptNumber();
      if (attempt > 0) {
        LOG.warn(
            "the trainer stage failed ({}); Spark runs it again (attempt {}), every rank resuming"
                + " from the run's latest checkpoint",
            latest != null ? latest : "an executor was lost",
            attempt + 1);
        latest = null;
      }
    }

    private static String describe(int rank, String description) {
      String prefix = "rank " + rank + ": ";
      // The ring's own errors already start with the rank that saw them, and a node's task's
      // with the rank of its that failed.
      return description.startsWith(prefix) || description.matches("(?s)rank \\d+[: ].*")
          ? description
          : prefix + description;
    }

    RuntimeException explain(Exception stageFailure) {
      try {
        // Listeners hear of the task's end on Spark's event thread, shortly after the job fails.
        seen.await(3, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      ExceptionFailure failure = first;
      if (failure == null) {
        return stageFailure instanceof RuntimeException unchecked
            ? unchecked
            : new RankFailedException(stageFailure.getMessage(), stageFailure);
      }
      String message = describe(rank, failure.description());
      return failure.className().equals(ConfigException.class.getName())
          ? new ConfigException(message)
          : new RankFailedException(message, stageFailure);
    }
  }

  /**
   * The host memory this rank may plan with: in local mode the machine's (the driver's JVM is the
   * executor), on a cluster what its executor was given beside the heap.
   */
  private static HostLimit hostLimit() {
    return local() ? HostLimit.MACHINE : ExecutorMemory.hostLimit(SparkEnv.get().conf());
  }

  /** Whether every rank runs in this one process (local[N]), sharing its console. */
  private static boolean local() {
    return SparkEnv.get().conf().get("spark.master", "").startsWith("local");
  }

  /** The host of the executor running {@code rank}, as Spark's scheduler knows it. */
  private static String host(BarrierTaskContext task, int rank) {
    String address = task.getTaskInfos()[rank].address();
    int colon = address.lastIndexOf(':');
    return colon > 0 ? address.substring(0, colon) : address;
  }
}
