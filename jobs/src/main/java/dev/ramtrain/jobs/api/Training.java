package dev.ramtrain.jobs.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.ramtrain.etl.dataset.DirectoryLock;
import dev.ramtrain.jobs.report.RunRecord;
import dev.ramtrain.jobs.train.JobSpec;
import dev.ramtrain.jobs.train.RunReports;
import dev.ramtrain.trainer.EvalResult;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import javax.imageio.ImageIO;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * A training run started from code: it trains on a thread of its own while the caller looks at its
 * metrics (read from the run directory's metrics.jsonl at each call, so a paragraph run again shows
 * the epochs since), and {@link #await} gives the final evaluation once the report is written. The
 * run directory must be local to the driver for the live metrics. The trainer task holds a task
 * slot while it trains: a query of the metrics needs another one (local[2] or more).
 */
public final class Training {
  private static final StructType EPOCHS =
      new StructType()
          .add("epoch", DataTypes.IntegerType)
          .add("step", DataTypes.LongType)
          .add("train_loss", DataTypes.DoubleType)
          .add("train_acc", DataTypes.DoubleType)
          .add("val_loss", DataTypes.DoubleType)
          .add("val_acc", DataTypes.DoubleType)
          .add("samples_per_s", DataTypes.DoubleType)
          .add("seconds", DataTypes.DoubleType)
          .add("data_stall_pct", DataTypes.DoubleType);
  private static final StructType STEPS =
      new StructType().add("step", DataTypes.LongType).add("loss", DataTypes.DoubleType);

  /** The final evaluation on val and where the report is. */
  public record Result(double accuracy, double loss, long samples, String report) {}

  private final SparkSession spark;
  private final JobSpec spec;
  private final String jobGroup;
  private final CompletableFuture<Result> result;

  private Training(
      SparkSession spark, JobSpec spec, String jobGroup, CompletableFuture<Result> result) {
    this.spark = spark;
    this.spec = spec;
    this.jobGroup = jobGroup;
    this.result = result;
  }

  static Training start(
      SparkSession spark, JobSpec spec, List<String> classes, Callable<EvalResult> work) {
    CompletableFuture<Result> result = new CompletableFuture<>();
    String jobGroup = "ramtrain-training-" + java.util.UUID.randomUUID();
    Thread thread =
        new Thread(
            () -> {
              try {
                // Its own job group, so that cancel() stops this run's Spark jobs and no other.
                spark
                    .sparkContext()
                    .setJobGroup(jobGroup, "ramtrain: training into " + spec.output().dir(), true);
                EvalResult eval = work.call();
                String report =
                    RunReports.write(
                        spec.output(), eval, classes, spark.sparkContext().hadoopConfiguration());
                result.complete(new Result(eval.accuracy(), eval.loss(), eval.samples(), report));
              } catch (Throwable e) { // the caller sees it from await()
                awaitTasksGone(spec);
                result.completeExceptionally(e);
              }
            },
            "ramtrain-training " + spec.output().dir());
    thread.setDaemon(true); // a notebook that is closed does not wait for it
    thread.start();
    return new Training(spark, spec, jobGroup, result);
  }

  /**
   * A failed or cancelled job returns to the driver before its killed tasks have ended their step
   * and released the run directory: until they have (the lock file gone, at most two minutes), a
   * resume would find it taken. A remote run's lock is not watched.
   */
  private static void awaitTasksGone(JobSpec spec) {
    if (spec.output().remote()) {
      return;
    }
    Path lock = spec.output().path().resolve(DirectoryLock.FILE);
    long deadline = System.nanoTime() + 120_000_000_000L;
    while (Files.exists(lock) && System.nanoTime() < deadline) {
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  /** The run directory. */
  public String output() {
    return spec.output().dir();
  }

  public boolean isDone() {
    return result.isDone();
  }

  /**
   * Stops the run: its Spark jobs are cancelled (the trainer tasks interrupted); {@link #await}
   * then throws. The run directory keeps its checkpoints: {@code RamTrain.resume} (or {@code
   * ramtrain train --resume}) goes on from the latest.
   */
  public void cancel() {
    spark.sparkContext().cancelJobGroup(jobGroup);
  }

  /** Waits for the run's end; a failed run throws, with its cause. */
  public Result await() throws Exception {
    try {
      return result.get();
    } catch (ExecutionException e) {
      throw e.getCause() instanceof Exception cause ? cause : e;
    }
  }

  /** One row per epoch finished so far (none before the first). */
  public Dataset<Row> epochs() {
    List<Row> rows = new ArrayList<>();
    RunRecord run = record();
    if (run != null) {
      for (JsonNode r : run.epochs()) {
        rows.add(
            RowFactory.create(
                r.path("epoch").asInt(),
                r.path("step").asLong(),
                r.path("train_loss").asDouble(),
                r.path("train_acc").asDouble(),
                r.path("val_loss").asDouble(),
                r.path("val_acc").asDouble(),
                r.path("samples_per_s").asDouble(),
                r.path("seconds").asDouble(),
                r.path("data_stall_pct").asDouble()));
      }
    }
    return spark.createDataFrame(rows, EPOCHS);
  }

  /** Every training step's loss logged so far. */
  public Dataset<Row> steps() {
    List<Row> rows = new ArrayList<>();
    RunRecord run = record();
    if (run != null) {
      for (int i = 0; i < run.lossSteps().length; i++) {
        double loss = run.stepLoss()[i];
        rows.add(RowFactory.create((long) run.lossSteps()[i], Double.isNaN(loss) ? null : loss));
      }
    }
    return spark.createDataFrame(rows, STEPS);
  }

  /** The confusion matrix of the final evaluation, for a {@code %html} paragraph (after await). */
  public String confusionHtml() throws Exception {
    await();
    Path png = localRun().resolve("report/confusion.png");
    return Html.image(ImageIO.read(png.toFile()), "confusion matrix of " + output());
  }

  private RunRecord record() {
    Path dir = localRun();
    if (!Files.exists(dir.resolve("metrics.jsonl"))) {
      return null;
    }
    try {
      return RunRecord.read(dir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private Path localRun() {
    if (spec.output().remote()) {
      throw new UnsupportedOperationException(
          output()
              + ": the live metrics of a run on a remote filesystem are not read here;"
              + " its report is written there at the end");
    }
    return spec.output().path();
  }

  @Override
  public String toString() {
    if (!result.isDone()) {
      return "training into " + output() + " (running)";
    }
    try {
      Result r = result.join();
      return String.format(
          "trained into %s: val accuracy %.4f, loss %.4f over %,d samples",
          output(), r.accuracy(), r.loss(), r.samples());
    } catch (CompletionException e) {
      return "training into " + output() + " failed: " + e.getCause();
    }
  }
}
