package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.spark.InMemoryShards;
import dev.ramtrain.etl.spark.ShardResult;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.data.ShardSet;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Trains on the in-memory shards of a preprocessing run inside the same Spark application, as a
 * barrier stage of one task: the seed of one trainer task per node. The cached shards are shuffled
 * into the single partition the trainer task reads (Spark does not allow a barrier stage over a
 * coalesced RDD), so they reach the trainer's node whichever executors cached them.
 */
public final class BarrierTraining
    extends AbstractFunction1<Iterator<ShardResult>, Iterator<EvalResult>> implements Serializable {
  private final RunSpec spec;
  private final Manifest manifest;

  private BarrierTraining(RunSpec spec, Manifest manifest) {
    this.spec = spec;
    this.manifest = manifest;
  }

  /**
   * Runs the trainer task as {@code spec} says (the record travels to the executor as it is);
   * returns its final evaluation on the val split.
   */
  public static EvalResult run(RunSpec spec, InMemoryShards shards) {
    JavaRDD<ShardResult> gathered = shards.blocks().repartition(1);
    RDD<EvalResult> trained =
        gathered
            .rdd()
            .barrier()
            .mapPartitions(
                new BarrierTraining(spec, shards.manifest()),
                false,
                ClassTag$.MODULE$.apply(EvalResult.class));
    gathered.context().setJobDescription("ramtrain train: one trainer task (barrier stage)");
    List<EvalResult> results = trained.toJavaRDD().collect();
    if (results.size() != 1) {
      throw new IllegalStateException("expected one trainer task, got " + results.size());
    }
    return results.get(0);
  }

  /** The trainer task: runs on the executor with every shard of its partition. */
  @Override
  public Iterator<EvalResult> apply(Iterator<ShardResult> input) {
    BarrierTaskContext task = BarrierTaskContext.get();
    List<ShardResult> blocks = new ArrayList<>();
    CollectionConverters.asJava(input).forEachRemaining(blocks::add);
    blocks.sort(Comparator.comparing(ShardResult::split).thenComparingInt(ShardResult::shard));
    try (ShardSet train = open(blocks, Manifest.TRAIN);
        ShardSet val = open(blocks, Manifest.VAL)) {
      String source =
          "in-memory shards (stage " + task.stageId() + ", task " + task.partitionId() + ")";
      try (RunDirectory run = RunDirectory.open(spec.output().path(), spec.output().mode())) {
        EvalResult eval =
            TrainingRun.run(spec, new TrainingData(train, val, manifest, source), run);
        return CollectionConverters.asScala(List.of(eval).iterator());
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private ShardSet open(List<ShardResult> blocks, String split) throws IOException {
    List<ShardReader> readers = new ArrayList<>();
    try {
      for (ShardResult block : blocks) {
        if (block.split().equals(split) && block.stats().rows() > 0) {
          readers.add(InMemoryShards.open(block));
        }
      }
    } catch (IOException | RuntimeException e) {
      readers.forEach(ShardReader::close);
      throw e;
    }
    return new ShardSet(manifest.image().shape(), manifest.classes(), readers);
  }
}
