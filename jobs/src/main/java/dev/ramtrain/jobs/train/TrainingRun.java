package dev.ramtrain.jobs.train;

import dev.ramtrain.jobs.report.TrainingReport;
import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.run.RankContext;
import dev.ramtrain.trainer.run.RunOutput;
import dev.ramtrain.trainer.run.TrainingData;
import dev.ramtrain.trainer.run.TrainingSession;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * A training job's run, from the CLI's {@code train}, a Spark barrier task or a notebook: checks
 * that the checkpoint it resumes from was written by the same run, records the job's settings in
 * every checkpoint, and hands the rest to the trainer's {@link TrainingSession}.
 */
public final class TrainingRun {
  private TrainingRun() {}

  /**
   * Trains as {@code job} says on {@code data}, evaluating on its val split, writing metrics and
   * checkpoints into {@code run}. The checkpoints record the settings and data fingerprint that a
   * resume is checked against (unless the job's output says to resume anyway).
   */
  public static EvalResult run(JobSpec job, TrainingData data, RunDirectory run)
      throws IOException {
    return run(job, data, run, RankContext.SINGLE, null);
  }

  /**
   * The same as one rank of a data-parallel job ({@code job}'s run already {@code forRank}): rank 0
   * has the run directory and writes metrics and checkpoints; the others get {@code run} null and,
   * when resuming, {@code resumeFrom} (the checkpoint rank 0 goes on from). Returns the evaluation
   * over all ranks.
   */
  public static EvalResult run(
      JobSpec job,
      TrainingData data,
      RunDirectory run,
      RankContext rank,
      Checkpoints.Loaded resumeFrom)
      throws IOException {
    SortedMap<String, String> settings = job.resumeSettings();
    String fingerprint = RunFingerprint.data(data.manifest());
    Checkpoints.Loaded checkpoint = run != null ? run.checkpoint() : resumeFrom;
    if (checkpoint != null) {
      RunFingerprint.requireSameRun(checkpoint, settings, fingerprint, job.output().resumeAnyway());
    }
    Map<String, Object> record = new TreeMap<>(RunFingerprint.record(settings, fingerprint));
    record.put("config", recordedConfig(job)); // every setting, for the report
    record.put("build", BuildInfo.record());
    RunOutput output = new RunOutput(run, checkpoint, record, job.output().checkpointEvery());
    return TrainingSession.run(job.run(), data, output, rank, new EtlImageNatives());
  }

  /**
   * The settings a checkpoint records for the report: all of them but where the run directory is
   * and whether this invocation replaced one, which say how it was started, not what it computed (a
   * run resumed in a moved directory writes the same state.json as the one left in place).
   */
  private static SortedMap<String, String> recordedConfig(JobSpec job) {
    SortedMap<String, String> config = new TreeMap<>(job.resolvedConfig());
    config.remove("ramtrain.train.output");
    config.remove("ramtrain.train.overwrite");
    return config;
  }

  /** Writes the report of the run in {@code runDir} from its metrics and final evaluation. */
  public static Path report(Path runDir, EvalResult eval, List<String> classes) throws IOException {
    return TrainingReport.write(runDir, "val", eval, classes, RunJournal.of(runDir)::claim);
  }
}
