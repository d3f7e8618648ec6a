package dev.ramtrain.jobs.train;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.run.RunSpec;
import java.io.Serializable;
import java.nio.file.Path;
import java.util.Collections;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * A training job as its settings describe it, read and checked once ({@code TrainSettings.read})
 * and passed down as values: the run the trainer computes ({@link RunSpec}), where it writes, and
 * what a resume is checked against. The CLI's {@code train}, the Spark barrier task and a notebook
 * all hand the same record to {@link TrainingRun#run}.
 *
 * @param resumeSettings the settings a resumed run must share with its checkpoint (every {@code
 *     ramtrain.train.*} value that changes the numbers, and the seed), by key
 * @param resolvedConfig every ramtrain.* setting as this run resolved it, recorded in its
 *     checkpoints for the report
 */
public record JobSpec(
    RunSpec run,
    Output output,
    SortedMap<String, String> resumeSettings,
    SortedMap<String, String> resolvedConfig)
    implements Serializable {

  public JobSpec {
    resumeSettings = Collections.unmodifiableSortedMap(new TreeMap<>(resumeSettings));
    resolvedConfig = Collections.unmodifiableSortedMap(new TreeMap<>(resolvedConfig));
  }

  /**
   * The run directory and what to do with a run already there; {@code resumeAnyway} resumes even
   * though the settings or data differ from the checkpoint's; {@code checkpointEvery}: steps
   * between checkpoints within an epoch (0: at the end of each epoch only); {@code
   * keepCheckpoints}: the newest epoch checkpoints kept besides the best (0: every one).
   */
  public record Output(
      String dir,
      RunDirectory.Mode mode,
      boolean resumeAnyway,
      int checkpointEvery,
      int keepCheckpoints)
      implements Serializable {
    public Output {
      if (keepCheckpoints < 0) {
        throw new ConfigException(
            "ramtrain.train.keep-checkpoints must be >= 0 (0: every checkpoint)");
      }
      if (resumeAnyway && mode != RunDirectory.Mode.RESUME) {
        throw new ConfigException("--resume-anyway goes with --resume");
      }
      if (checkpointEvery < 0) {
        throw new ConfigException(
            "ramtrain.train.checkpoint-every must be >= 0 (0: at the end of each epoch only)");
      }
    }

    /** The same directory and cadence, opened in {@code other} mode. */
    public Output in(RunDirectory.Mode other) {
      return new Output(
          dir,
          other,
          resumeAnyway && other == RunDirectory.Mode.RESUME,
          checkpointEvery,
          keepCheckpoints);
    }

    /**
     * Whether the run directory is on a Hadoop filesystem other than this machine's disk: a URI
     * with a scheme other than {@code file} (hdfs://, s3a://, ...).
     */
    public boolean remote() {
      String scheme = scheme(dir);
      return scheme != null && !scheme.equals("file");
    }

    /** The local run directory ({@code file:} URIs too); a remote one has none. */
    public Path path() {
      if (remote()) {
        throw new IllegalStateException(dir + " is not on this machine's filesystem");
      }
      return "file".equals(scheme(dir)) ? Path.of(java.net.URI.create(dir)) : Path.of(dir);
    }

    private static String scheme(String location) {
      try {
        String scheme = new java.net.URI(location).getScheme();
        return scheme == null || scheme.length() < 2 ? null : scheme; // not a Windows drive
      } catch (java.net.URISyntaxException e) {
        return null; // a local path with characters a URI does not take
      }
    }
  }

  /** This job for the dataset {@code manifest} describes ({@link RunSpec#forDataset}). */
  public JobSpec forDataset(Manifest manifest) {
    return withRun(run.forDataset(manifest.image().shape(), manifest.classes()));
  }

  /** This job computing {@code other} (for a rank, on a device, for a dataset's classes). */
  public JobSpec withRun(RunSpec other) {
    return new JobSpec(other, output, resumeSettings, resolvedConfig);
  }

  /** This run writing to {@code other}. */
  public JobSpec withOutput(Output other) {
    return new JobSpec(run, other, resumeSettings, resolvedConfig);
  }

  /** This run continuing the one in its directory ({@code --resume}). */
  public JobSpec resuming(boolean anyway) {
    boolean overwrite = output.mode() == RunDirectory.Mode.OVERWRITE;
    return withOutput(
        new Output(
            output.dir(),
            RunDirectory.Mode.of(true, overwrite),
            anyway,
            output.checkpointEvery(),
            output.keepCheckpoints()));
  }
}
