package dev.ramtrain.etl.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkContext;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.StageInfo;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Where a job's time goes, stage by stage, from Spark's own task metrics: wall time, task time
 * summed over cores and what it was spent on (CPU, GC, deserializing the task, shuffle write, fetch
 * wait). Only the stages of jobs started in the given job group are counted.
 */
final class StageBreakdown extends SparkListener implements AutoCloseable {

  /** The local property SparkContext.setJobGroup sets (its constant is private to Spark). */
  private static final String JOB_GROUP_PROPERTY = "spark.jobGroup.id";

  private final SparkContext sc;
  private final String jobGroup;
  private final Set<Integer> stageIds = ConcurrentHashMap.newKeySet();
  private final Set<Integer> jobs = ConcurrentHashMap.newKeySet();
  private int endedJobs; // guarded by this
  private final Map<Integer, double[]> sums = new ConcurrentHashMap<>();
  private final Map<Integer, PreprocessTiming.Stage> finished = new ConcurrentHashMap<>();

  private StageBreakdown(SparkContext sc, String jobGroup) {
    this.sc = sc;
    this.jobGroup = jobGroup;
  }

  static StageBreakdown listen(SparkContext sc, String jobGroup) {
    StageBreakdown breakdown = new StageBreakdown(sc, jobGroup);
    sc.addSparkListener(breakdown);
    return breakdown;
  }

  @Override
  public void onJobStart(SparkListenerJobStart start) {
    if (start.properties() != null
        && jobGroup.equals(start.properties().getProperty(JOB_GROUP_PROPERTY))) {
      jobs.add(start.jobId());
      for (StageInfo stage : CollectionConverters.asJava(start.stageInfos())) {
        stageIds.add(stage.stageId());
      }
    }
  }

  // Indices into a stage's sums.
  private static final int TASK = 0;
  private static final int CPU = 1;
  private static final int GC = 2;
  private static final int DESERIALIZE = 3;
  private static final int SHUFFLE_WRITE_BYTES = 4;
  private static final int SHUFFLE_WRITE = 5;
  private static final int SHUFFLE_READ_BYTES = 6;
  private static final int FETCH_WAIT = 7;

  @Override
  public void onTaskEnd(SparkListenerTaskEnd end) {
    TaskMetrics m = end.taskMetrics();
    if (m == null || !stageIds.contains(end.stageId())) {
      return;
    }
    double[] s = sums.computeIfAbsent(end.stageId(), id -> new double[8]);
    synchronized (s) {
      s[TASK] += m.executorRunTime() / 1e3;
      s[CPU] += m.executorCpuTime() / 1e9;
      s[GC] += m.jvmGCTime() / 1e3;
      s[DESERIALIZE] += m.executorDeserializeTime() / 1e3;
      s[SHUFFLE_WRITE_BYTES] += m.shuffleWriteMetrics().bytesWritten();
      s[SHUFFLE_WRITE] += m.shuffleWriteMetrics().writeTime() / 1e9;
      s[SHUFFLE_READ_BYTES] += m.shuffleReadMetrics().totalBytesRead();
      s[FETCH_WAIT] += m.shuffleReadMetrics().fetchWaitTime() / 1e3;
    }
  }

  @Override
  public void onStageCompleted(SparkListenerStageCompleted completed) {
    StageInfo info = completed.stageInfo();
    if (!stageIds.contains(info.stageId())) {
      return;
    }
    long submitted = info.submissionTime().isDefined() ? (Long) info.submissionTime().get() : 0;
    long done = info.completionTime().isDefined() ? (Long) info.completionTime().get() : 0;
    double[] s = sums.getOrDefault(info.stageId(), new double[8]);
    synchronized (s) {
      finished.put(
          info.stageId(),
          new PreprocessTiming.Stage(
              info.stageId(),
              info.name(),
              info.numTasks(),
              (done - submitted) / 1e3,
              s[TASK],
              s[CPU],
              s[GC],
              s[DESERIALIZE],
              (long) s[SHUFFLE_WRITE_BYTES],
              s[SHUFFLE_WRITE],
              (long) s[SHUFFLE_READ_BYTES],
              s[FETCH_WAIT]));
    }
  }

  @Override
  public void onJobEnd(SparkListenerJobEnd end) {
    if (jobs.contains(end.jobId())) {
      synchronized (this) {
        endedJobs++;
        notifyAll();
      }
    }
  }

  /**
   * The finished stages of the first {@code jobCount} jobs of the group, in the order they ran.
   * Listeners hear of jobs asynchronously: this waits (5 s at most) until that many jobs' ends have
   * reached this listener, and with them every task and stage event before them.
   */
  List<PreprocessTiming.Stage> stages(int jobCount) throws InterruptedException {
    long deadline = System.nanoTime() + 5_000_000_000L;
    synchronized (this) {
      while (endedJobs < jobCount && System.nanoTime() < deadline) {
        wait(100);
      }
    }
    List<PreprocessTiming.Stage> stages = new ArrayList<>(finished.values());
    stages.sort((a, b) -> Integer.compare(a.id(), b.id()));
    return stages;
  }

  @Override
  public void close() {
    sc.removeSparkListener(this);
  }
}
