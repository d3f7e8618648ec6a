package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.spark.InMemoryShards;
import dev.ramtrain.etl.spark.ShardResult;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.data.LoaderSpec;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.spark.Partitioner;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.storage.RDDInfo;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Trains on the in-memory shards of a preprocessing run in the same Spark application, one node per
 * executor that holds shards (its GPUs' ranks, driven by one trainer task over one host copy; one
 * rank without GPUs or locally, unless {@code ramtrain.dist.devices-per-node} says; or {@code
 * ramtrain.dist.ranks}), each rank on shards cached where it runs. The shards reach their ranks
 * through a shuffle keyed by {@link ShardAssignment}: its map side reads each cached block where it
 * lies, and Spark places each rank on the host whose map output it reads most of, so only the
 * shards moved to balance the ranks can cross the network (the trainer stage's remote shuffle
 * bytes, counted and reported). A shuffle also keeps recovery Spark's: a failed rank's stage is
 * retried and reads its shards again, recomputing those lost with an executor.
 */
public final class InMemoryTraining {
  private InMemoryTraining() {}

  /**
   * The final evaluation, the ranks, the shards moved to balance them, the shard bytes the ranks
   * read and how many of those came over the network.
   */
  public record Result(
      EvalResult eval, int ranks, int movedShards, long shardBytes, long networkBytes) {}

  public static Result run(JobSpec spec, TrainSettings.Dist dist, InMemoryShards shards) {
    List<ShardResult> placed = shards.placed();
    int executors = (int) placed.stream().map(ShardResult::executor).distinct().count();
    SparkContext sc = shards.blocks().context();
    // A node is an executor: its GPUs on a GPU cluster (or devices-per-node as set), one locally.
    int devices =
        sc.isLocal()
            ? dist.devicesPerNodeOr(1)
            : TrainerResources.clusterDevicesPerNode(dist, sc.getConf());
    int world = dist.ranksOr(Math.max(1, executors) * devices);
    if (world % devices != 0) {
      throw new ConfigException(
          String.format(
              "ramtrain.dist.devices-per-node = %d does not divide ramtrain.dist.ranks = %d",
              devices, world));
    }
    int nodes = world / devices;
    spec.run().forRank(0, world); // an uneven batch split is a usage error before anything starts
    ShardAssignment assignment = ShardAssignment.of(placed, world, nodes);
    assignment.requireABatchPerRank(spec.run().batchSize());
    boolean pad = spec.run().data().train().sampling().remainder() == LoaderSpec.Remainder.PAD;
    JavaRDD<ShardResult> byRank =
        shards
            .blocks()
            .filter(block -> assignment.rankOf(block) >= 0)
            .mapToPair(block -> new Tuple2<>(ShardAssignment.key(block), block))
            .partitionBy(new NodePartitioner(assignment, nodes))
            .values();
    ShardTraffic traffic = new ShardTraffic();
    sc.addSparkListener(traffic);
    EvalResult eval;
    try {
      eval =
          DistributedTraining.run(
              byRank.rdd(),
              new InMemoryRanks(shards.manifest(), assignment, assignment.trainPerEpoch(pad)),
              spec,
              // a node's input is its executor's cached shards, each device its rank's of them
              dist.withRanks(world).withDevicesPerNode(devices),
              "ranks on their executors' in-memory shards");
    } finally {
      traffic.awaitJobEnd(); // Spark's listeners hear of the tasks' ends after the job returns
      sc.removeSparkListener(traffic);
    }
    return new Result(
        eval, world, assignment.moved(), traffic.bytesRead(), traffic.remoteBytesRead());
  }

  /**
   * Sends each shard to the partition of the node of the rank assigned to it (rank r is on node r
   * mod nodes; with one device a node, the rank's own).
   */
  private static final class NodePartitioner extends Partitioner {
    private final ShardAssignment assignment;
    private final int nodes;

    NodePartitioner(ShardAssignment assignment, int nodes) {
      this.assignment = assignment;
      this.nodes = nodes;
    }

    @Override
    public int numPartitions() {
      return nodes;
    }

    @Override
    public int getPartition(Object key) {
      return assignment.rankOf((String) key) % nodes;
    }
  }

  /**
   * Shuffle bytes the trainer (barrier) stage's tasks read, and of those, how many came from
   * another host: the shards that crossed the network.
   */
  private static final class ShardTraffic extends SparkListener {
    private final CountDownLatch jobEnded = new CountDownLatch(1);
    private final Set<Integer> trainerStages = new HashSet<>();
    private long bytesRead;
    private long remoteBytesRead;

    @Override
    public synchronized void onStageSubmitted(SparkListenerStageSubmitted submitted) {
      for (RDDInfo rdd : CollectionConverters.asJava(submitted.stageInfo().rddInfos())) {
        if (rdd.isBarrier()) {
          trainerStages.add(submitted.stageInfo().stageId());
        }
      }
    }

    @Override
    public synchronized void onTaskEnd(SparkListenerTaskEnd end) {
      if (trainerStages.contains(end.stageId()) && end.taskMetrics() != null) {
        ShuffleReadMetrics read = end.taskMetrics().shuffleReadMetrics();
        bytesRead += read.localBytesRead() + read.remoteBytesRead();
        remoteBytesRead += read.remoteBytesRead();
      }
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd end) {
      jobEnded.countDown(); // the trainer's job, the only one run while this listens
    }

    void awaitJobEnd() {
      try {
        jobEnded.await(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    synchronized long bytesRead() {
      return bytesRead;
    }

    synchronized long remoteBytesRead() {
      return remoteBytesRead;
    }
  }
}
