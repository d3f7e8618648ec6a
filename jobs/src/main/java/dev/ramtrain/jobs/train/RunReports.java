package dev.ramtrain.jobs.train;

import dev.ramtrain.trainer.EvalResult;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.io.IOException;
import java.nio.file.Files;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Writes a finished run's report where its run directory is, on the driver: a local directory
 * directly; a remote one (HDFS, S3A) by reading its metrics back into a local folder, drawing the
 * report there and copying {@code report/} up, so the driver needs no disk shared with the rank
 * that trained.
 */
public final class RunReports {
  private RunReports() {}

  /**
   * Writes the report of the run in {@code output} with its final evaluation; returns where its
   * index.html is, or null when the run wrote no metrics (it stopped before its first epoch).
   */
  public static String write(
      JobSpec.Output output, EvalResult eval, List<String> classes, Configuration conf)
      throws IOException {
    if (!output.remote()) {
      java.nio.file.Path dir = output.path();
      return Files.exists(dir.resolve(RunDirectory.METRICS))
          ? TrainingRun.report(dir, eval, classes).toString()
          : null;
    }
    Path root = new Path(output.dir());
    FileSystem fs = root.getFileSystem(conf);
    Path metrics = new Path(root, RunDirectory.METRICS);
    if (!fs.exists(metrics)) {
      return null;
    }
    java.nio.file.Path local = Files.createTempDirectory("ramtrain-report-");
    try {
      java.nio.file.Path run = Files.createDirectory(local.resolve(root.getName())); // its name
      fs.copyToLocalFile(false, metrics, new Path(run.resolve(RunDirectory.METRICS).toUri()), true);
      copyLatestState(fs, root, run);
      java.nio.file.Path index = TrainingRun.report(run, eval, classes);
      Path report = new Path(root, RunDirectory.REPORT);
      fs.mkdirs(report);
      // File by file: the report's own files are replaced, anything else there stays.
      try (var files = Files.list(index.getParent())) {
        for (java.nio.file.Path f : files.toList()) {
          fs.copyFromLocalFile(
              false, true, new Path(f.toUri()), new Path(report, f.getFileName().toString()));
        }
      }
      return new Path(report, index.getFileName().toString()).toString();
    } finally {
      RemoteRun.deleteLocal(local);
    }
  }

  /**
   * The latest checkpoint's pointer and state.json (the run's settings for the report, without its
   * weights), when the run has one.
   */
  private static void copyLatestState(FileSystem fs, Path root, java.nio.file.Path run)
      throws IOException {
    Path checkpoints = new Path(root, RunDirectory.CHECKPOINTS);
    Path latest = new Path(checkpoints, Checkpoints.LATEST);
    if (!fs.exists(latest)) {
      return;
    }
    java.nio.file.Path localCheckpoints =
        Files.createDirectories(run.resolve(RunDirectory.CHECKPOINTS));
    java.nio.file.Path localLatest = localCheckpoints.resolve(Checkpoints.LATEST);
    fs.copyToLocalFile(false, latest, new Path(localLatest.toUri()), true);
    String name = Files.readString(localLatest).trim();
    Path state = new Path(new Path(checkpoints, name), "state.json");
    if (Checkpoints.isName(name) && fs.exists(state)) {
      java.nio.file.Path dir = Files.createDirectories(localCheckpoints.resolve(name));
      fs.copyToLocalFile(false, state, new Path(dir.resolve("state.json").toUri()), true);
    }
  }
}
