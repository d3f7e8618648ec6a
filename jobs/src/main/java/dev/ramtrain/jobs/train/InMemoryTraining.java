package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.spark.InMemoryShards;
import dev.ramtrain.etl.spark.ShardResult;
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
 * Trains on the in-memory shards of a preprocessing run in the same Spark application, one rank per
 * executor that holds shards (or {@code ramtrain.dist.ranks}), each rank on the shards cached where
 * it runs. The shards reach their ranks through a shuffle keyed by {@link ShardAssignment}: its map
 * side reads each cached block where it lies, and Spark places each rank on the host whose map
 * output it reads most of, so only the shards moved to balance the ranks can cross the network (the
 * trainer stage's remote shuffle bytes, counted and reported). A shuffle also keeps recovery
 * Spark's: a failed rank's stage is retried and reads its shards again, recomputing those lost with
 * an executor.
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
    int world = dist.ranksOr(Math.max(1, executors));
    spec.run().forRank(0, world); // an uneven batch split is a usage error before anything starts
    ShardAssignment assignment = ShardAssignment.of(placed, world);
    assignment.requireABatchPerRank(spec.run().batchSize());
    boolean pad = spec.run().data().train().sampling().remainder() == LoaderSpec.Remainder.PAD;
    JavaRDD<ShardResult> byRank =
        shards
            .blocks()
            .filter(block -> assignment.rankOf(block) >= 0)
            .mapToPair(block -> new Tuple2<>(ShardAssignment.key(block), block))
            .partitionBy(new RankPartitioner(assignment))
            .values();
    SparkContext sc = byRank.context();
    ShardTraffic traffic = new ShardTraffic();
    sc.addSparkListener(traffic);
    EvalResult eval;
    try {
      eval =
          DistributedTraining.run(
              byRank.rdd(),
              new InMemoryRanks(shards.manifest(), assignment.trainPerEpoch(pad)),
              spec,
              // a rank's input is its executor's cached shards: one rank a task
              dist.withRanks(world).withDevicesPerNode(1),
              "ranks on their executors' in-memory shards");
    } finally {
      traffic.awaitJobEnd(); // Spark's listeners hear of the tasks' ends after the job returns
      sc.removeSparkListener(traffic);
    }
    return new Result(
        eval, world, assignment.moved(), traffic.bytesRead(), traffic.remoteBytesRead());
  }

  /** Sends each shard to the partition of the rank assigned to it. */
  private static final class RankPartitioner extends Partitioner {
    private final ShardAssignment assignment;

    RankPartitioner(ShardAssignment assignment) {
      this.assignment = assignment;
    }

    @Override
    public int numPartitions() {
      return assignment.world();
    }

    @Override
    public int getPartition(Object key) {
      return assignment.rankOf((String) key);
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
