package dev.ramtrain.jobs.train;

import dev.ramtrain.trainer.EvalResult;
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
      RunSpec.Output output, EvalResult eval, List<String> classes, Configuration conf)
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
      fs.copyToLocalFile(
          false, metrics, new Path(local.resolve(RunDirectory.METRICS).toUri()), true);
      java.nio.file.Path index = TrainingRun.report(local, eval, classes);
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
}
