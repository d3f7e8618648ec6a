package dev.ramtrain.jobs.train;

import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.LoopSpec;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.BackendSpec;
import dev.ramtrain.trainer.data.BadSamples;
import dev.ramtrain.trainer.data.DataLoader;
import dev.ramtrain.trainer.data.LoaderSpec;
import dev.ramtrain.trainer.data.ShardSet;
import dev.ramtrain.trainer.offload.OffloadSpec;
import dev.ramtrain.trainer.optim.OptimizerSpec;
import dev.ramtrain.trainer.optim.ScheduleSpec;
import dev.ramtrain.trainer.run.ModelChoice;
import java.io.Serializable;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * Everything a training run needs to know, read and checked once ({@code TrainSettings.read}) and
 * passed down as values: the CLI's {@code train}, the Spark barrier task and a notebook all hand
 * the same record to {@link TrainingRun#run}.
 *
 * @param resumeSettings the settings a resumed run must share with its checkpoint (every {@code
 *     ramtrain.train.*} value that changes the numbers, and the seed), by key
 */
public record RunSpec(
    Data data,
    ModelChoice model,
    OptimizerSpec optimizer,
    ScheduleSpec schedule,
    LoopSpec loop,
    OffloadSpec offload,
    BackendSpec backend,
    Output output,
    SortedMap<String, String> resumeSettings,
    SortedMap<String, String> resolvedConfig)
    implements Serializable {

  /**
   * {@code resumeSettings}: what a resume is checked against; {@code resolvedConfig}: every
   * ramtrain.* setting as this run resolved it, recorded in its checkpoints for the report.
   */
  public RunSpec {
    resumeSettings = Collections.unmodifiableSortedMap(new TreeMap<>(resumeSettings));
    resolvedConfig = Collections.unmodifiableSortedMap(new TreeMap<>(resolvedConfig));
  }

  /**
   * Where the samples come from and how they are loaded for training and for evaluation: {@code
   * filter} resizes load-time crops, {@code badSamples} says what a stored JPEG that does not
   * decode does, {@code shardWindow} how many shards a loader reads at a time (0: every shard
   * opened at once).
   */
  public record Data(
      String location,
      LoaderSpec train,
      LoaderSpec eval,
      ResizeFilter filter,
      BadSamples badSamples,
      int shardWindow)
      implements Serializable {
    /**
     * A loader over {@code shards} as {@code options} say, crops resized with {@code filter}, JPEG
     * rows decoded by libjpeg-turbo.
     */
    public DataLoader loader(
        Backend backend, ShardSet shards, LoaderSpec options, ResizeFilter filter) {
      return new DataLoader(
          backend, shards, options, filter.resamplers(), new LibjpegRows(), badSamples);
    }

    /** The dataset directory; a usage error when none was given. */
    public String requireLocation() {
      if (location.isBlank()) {
        throw new ConfigException(
            "ramtrain.train.dataset: a dataset directory is required (--dataset DIR)");
      }
      return location;
    }
  }

  /**
   * This run for a dataset of {@code classes}: a model named without a class count (a timm name)
   * gets one output per class, as timm's num_classes; other specs are kept as they are.
   */
  public RunSpec forClasses(List<String> classes) {
    String resolved = dev.ramtrain.trainer.nn.ModelSpec.withClasses(model.spec(), classes.size());
    if (resolved.equals(model.spec())) {
      return this;
    }
    return new RunSpec(
        data,
        new ModelChoice(
            resolved,
            model.seed(),
            model.precision(),
            model.weights(),
            model.dropPath(),
            model.ema()),
        optimizer,
        schedule,
        loop,
        offload,
        backend,
        output,
        resumeSettings,
        resolvedConfig);
  }

  /**
   * The run directory and what to do with a run already there; {@code resumeAnyway} resumes even
   * though the settings or data differ from the checkpoint's; {@code checkpointEvery}: steps
   * between checkpoints within an epoch (0: at the end of each epoch only).
   */
  public record Output(
      String dir, RunDirectory.Mode mode, boolean resumeAnyway, int checkpointEvery)
      implements Serializable {
    public Output {
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
          dir, other, resumeAnyway && other == RunDirectory.Mode.RESUME, checkpointEvery);
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

  /** The samples per step (the largest batch the model runs). */
  public int batchSize() {
    return data.train().batchSize();
  }

  /**
   * This run as rank {@code rank} of {@code world} data-parallel ranks: {@code batch-size} is the
   * global batch, and each rank loads {@code batch-size / world} of it (its share of every batch's
   * positions, as PyTorch's DistributedSampler) and evaluates its share of the val split. The
   * settings a resume checks stay the global ones.
   */
  public RunSpec forRank(int rank, int world) {
    return forRank(new LoaderSpec.Rank(rank, world), new LoaderSpec.Rank(rank, world));
  }

  /**
   * This run as rank {@code rank} of {@code world} ranks that each train on shards of their own,
   * taking {@code trainPerEpoch} samples of them each epoch (the count every rank takes) and
   * evaluating all of its own; otherwise as {@link #forRank(int, int)}.
   */
  public RunSpec forRankWithOwnShards(int rank, int world, long trainPerEpoch) {
    return forRank(
        LoaderSpec.Rank.owning(rank, world, trainPerEpoch), LoaderSpec.Rank.owning(rank, world, 0));
  }

  private RunSpec forRank(LoaderSpec.Rank train, LoaderSpec.Rank eval) {
    int world = train.worldSize();
    int global = batchSize();
    if (global % world != 0) {
      throw new ConfigException(
          String.format(
              "ramtrain.train.batch-size = %d cannot be split evenly over ramtrain.dist.ranks = %d",
              global, world));
    }
    Data shared =
        new Data(
            data.location(),
            data.train().forRank(global / world, train),
            // The model runs at most the per-rank batch: evaluation batches shrink alike.
            data.eval().forRank(Math.max(1, data.eval().batchSize() / world), eval),
            data.filter(),
            data.badSamples(),
            data.shardWindow());
    return new RunSpec(
        shared,
        model,
        optimizer,
        schedule,
        loop,
        offload,
        backend,
        output,
        resumeSettings,
        resolvedConfig);
  }

  /** This run on {@code other}. */
  public RunSpec withBackend(BackendSpec other) {
    return new RunSpec(
        data,
        model,
        optimizer,
        schedule,
        loop,
        offload,
        other,
        output,
        resumeSettings,
        resolvedConfig);
  }

  /** This run writing to {@code other}. */
  public RunSpec withOutput(Output other) {
    return new RunSpec(
        data,
        model,
        optimizer,
        schedule,
        loop,
        offload,
        backend,
        other,
        resumeSettings,
        resolvedConfig);
  }

  /** This run continuing the one in its directory ({@code --resume}). */
  public RunSpec resuming(boolean anyway) {
    boolean overwrite = output.mode() == RunDirectory.Mode.OVERWRITE;
    Output resumed =
        new Output(
            output.dir(), RunDirectory.Mode.of(true, overwrite), anyway, output.checkpointEvery());
    return new RunSpec(
        data,
        model,
        optimizer,
        schedule,
        loop,
        offload,
        backend,
        resumed,
        resumeSettings,
        resolvedConfig);
  }
}
