package dev.ramtrain.jobs.train;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.etl.dataset.DirectoryLock;
import dev.ramtrain.format.IoErrors;
import dev.ramtrain.format.PausePoints;
import dev.ramtrain.jobs.config.ConfigException;
import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.checkpoint.CheckpointSink;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A training run's directory ({@code ramtrain.train.output}): {@code metrics.jsonl}, {@code
 * checkpoints/epoch-NNNN/}, {@code checkpoints/latest}, {@code report/}. One writer at a time
 * ({@link DirectoryLock}); nothing of an earlier run is lost by accident:
 *
 * <ul>
 *   <li>a new run needs a new or empty directory;
 *   <li>{@link Mode#RESUME} continues the run from its latest checkpoint, its metrics cut back to
 *       that checkpoint so they continue from its step;
 *   <li>{@link Mode#OVERWRITE} moves the old run's files aside into {@value #PREVIOUS} and deletes
 *       them only once the new run has saved its first checkpoint. A new run that fails before then
 *       gets the old one put back when it closes; one that is killed, when the directory is next
 *       opened.
 * </ul>
 *
 * Files in the directory that are not a run's are never touched.
 */
public final class RunDirectory implements CheckpointSink, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RunDirectory.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  public static final String METRICS = "metrics.jsonl";
  static final String LEGACY_RESUMED_METRICS = "metrics-resumed.jsonl"; // before one metrics file
  static final String CHECKPOINTS = "checkpoints";
  static final String REPORT = "report";
  static final String PREVIOUS = "_previous-run";
  static final String MOVED = "_ramtrain-moved.json";

  /** A run's own entries; the checkpoints first, which decides whether a replacement happened. */
  private static final List<String> RUN_ENTRIES =
      List.of(CHECKPOINTS, METRICS, LEGACY_RESUMED_METRICS, REPORT);

  public enum Mode {
    FRESH,
    RESUME,
    OVERWRITE;

    /** The mode {@code --resume} and {@code ramtrain.train.overwrite} ask for. */
    public static Mode of(boolean resume, boolean overwrite) {
      if (resume && overwrite) {
        throw new ConfigException(
            "--resume continues the run in ramtrain.train.output, --overwrite replaces it: give one");
      }
      return resume ? RESUME : overwrite ? OVERWRITE : FRESH;
    }
  }

  private final Path dir;
  private final boolean createdDir;
  private final DirectoryLock lock;
  private final Checkpoints.Loaded checkpoint;
  private final Map<String, Object> info = new TreeMap<>();
  private boolean previousPending;
  private CheckpointPublisher publisher;

  /** Hears of each checkpoint once it is saved and made the latest here, and of the best. */
  public interface CheckpointPublisher {
    void publish(Path saved) throws IOException;

    /** Checkpoint {@code name}, published before, is the run's best. */
    void publishBest(String name) throws IOException;
  }

  private RunDirectory(
      Path dir,
      boolean createdDir,
      DirectoryLock lock,
      Checkpoints.Loaded checkpoint,
      boolean moved) {
    this.dir = dir;
    this.createdDir = createdDir;
    this.lock = lock;
    this.checkpoint = checkpoint;
    this.previousPending = moved;
  }

  /**
   * Opens {@code dir} for a run in {@code mode}: takes its lock, finishes what a killed run left,
   * and refuses what the mode does not allow (naming {@code ramtrain.train.output}).
   */
  public static RunDirectory open(Path dir, Mode mode) throws IOException {
    Path run = dir.toAbsolutePath().normalize();
    if (Files.exists(run) && !Files.isDirectory(run)) {
      throw new ConfigException(
          "ramtrain.train.output = " + run + " exists and is not a directory");
    }
    boolean created = !Files.exists(run);
    try {
      Files.createDirectories(run);
    } catch (IOException e) {
      throw new IOException(
          "cannot create the run directory " + run + ": " + IoErrors.reason(e), e);
    }
    DirectoryLock lock =
        DirectoryLock.acquire(
            new org.apache.hadoop.fs.Path(run.toUri()), new Configuration(), "train");
    try {
      putBackOrDiscardPrevious(run);
      List<String> runEntries = new ArrayList<>();
      List<String> foreign = new ArrayList<>();
      try (Stream<Path> entries = Files.list(run)) {
        for (Path p : entries.sorted().toList()) {
          String name = p.getFileName().toString();
          if (RUN_ENTRIES.contains(name)) {
            runEntries.add(name);
          } else if (!name.equals(DirectoryLock.FILE)) {
            foreign.add(name);
          }
        }
      }
      if (runEntries.isEmpty() && !foreign.isEmpty() && mode != Mode.RESUME) {
        throw new ConfigException(
            "ramtrain.train.output = "
                + run
                + " is not empty and holds no training run ("
                + String.join(", ", foreign.subList(0, Math.min(5, foreign.size())))
                + "): choose a new or empty directory");
      }
      return switch (mode) {
        case FRESH -> {
          if (!runEntries.isEmpty()) {
            throw new ConfigException(
                "ramtrain.train.output = "
                    + run
                    + " already holds a training run ("
                    + String.join(", ", runEntries)
                    + "): --resume continues it, --overwrite replaces it (the old run is kept"
                    + " until the new one has saved its first checkpoint)");
          }
          yield new RunDirectory(run, created, lock, null, false);
        }
        case RESUME -> {
          if (!Files.exists(run.resolve(CHECKPOINTS).resolve(Checkpoints.LATEST))) {
            throw new ConfigException(
                "--resume: "
                    + run
                    + " has no checkpoint to resume from; leave out --resume to start a new run");
          }
          yield new RunDirectory(run, created, lock, Checkpoints.loadLatest(run), false);
        }
        case OVERWRITE -> {
          if (!runEntries.isEmpty()) {
            moveAside(run, runEntries);
          }
          yield new RunDirectory(run, created, lock, null, !runEntries.isEmpty());
        }
      };
    } catch (IOException | RuntimeException e) {
      lock.close();
      removeIfEmpty(run, created);
      throw e;
    }
  }

  public Path path() {
    return dir;
  }

  /** The checkpoint a resumed run continues from; null for a new run. */
  public Checkpoints.Loaded checkpoint() {
    return checkpoint;
  }

  /**
   * The run's metrics file: new for a new run; for a resumed one, cut back to the checkpoint and
   * continued (called once the run is known to go ahead, so a refused resume changes nothing).
   */
  public MetricsLog metrics() throws IOException {
    if (checkpoint != null) {
      keepMetricsUntil(dir, checkpoint);
    }
    return new MetricsLog(dir.resolve(METRICS), checkpoint != null);
  }

  /** Has {@code p} hear of every checkpoint saved from now on (a remote copy publishing it). */
  public void afterEachCheckpoint(CheckpointPublisher p) {
    this.publisher = p;
  }

  /** What every checkpoint's state.json records besides the loop's position. */
  public void recordInCheckpoints(Map<String, Object> info) {
    this.info.putAll(info);
  }

  @Override
  public Path save(String name, int epochsDone, long globalStep, Checkpoints.Snapshot snapshot)
      throws IOException {
    Path saved = Checkpoints.save(dir, name, epochsDone, globalStep, snapshot, info);
    if (previousPending) {
      PausePoints.reach("overwrite.before-discard");
      deleteTree(dir.resolve(PREVIOUS));
      previousPending = false;
      LOG.info("the replaced run in {} is gone: this run has its first checkpoint", dir);
    }
    if (publisher != null) {
      publisher.publish(saved);
    }
    return saved;
  }

  @Override
  public void markBest(String name) throws IOException {
    Checkpoints.point(dir, Checkpoints.BEST, name);
    if (publisher != null) {
      publisher.publishBest(name);
    }
  }

  /** Puts a replaced run back if this one saved no checkpoint, then releases the directory. */
  @Override
  public void close() {
    try {
      if (previousPending) {
        putBackOrDiscardPrevious(dir);
      }
    } catch (IOException e) {
      LOG.error(
          "could not put the replaced run back from {}: {}", dir.resolve(PREVIOUS), e.toString());
    } finally {
      lock.close();
      removeIfEmpty(dir, createdDir);
    }
  }

  /** Removes a run directory this run created if it left nothing in it. */
  private static void removeIfEmpty(Path dir, boolean created) {
    if (!created) {
      return;
    }
    try (Stream<Path> entries = Files.list(dir)) {
      if (entries.findAny().isEmpty()) {
        Files.delete(dir);
      }
    } catch (IOException e) {
      LOG.warn("could not remove the empty run directory {}: {}", dir, e.toString());
    }
  }

  /** Moves a run's entries into {@value #PREVIOUS}, journaling the names first. */
  private static void moveAside(Path run, List<String> entries) throws IOException {
    Path previous = run.resolve(PREVIOUS);
    Files.createDirectories(previous);
    List<String> ordered = RUN_ENTRIES.stream().filter(entries::contains).toList();
    Files.write(previous.resolve(MOVED), JSON.writeValueAsBytes(ordered));
    for (String name : ordered) {
      Files.move(run.resolve(name), previous.resolve(name), StandardCopyOption.ATOMIC_MOVE);
    }
    PausePoints.reach("overwrite.moved-aside");
    LOG.info("moved the run in {} aside until the new run has its first checkpoint", run);
  }

  /**
   * Settles a replacement that did not finish: with a checkpoint of the new run the old run's files
   * go; without one, the new run's files go and the old run's come back.
   */
  private static void putBackOrDiscardPrevious(Path run) throws IOException {
    Path previous = run.resolve(PREVIOUS);
    if (!Files.isDirectory(previous)) {
      return;
    }
    Path journal = previous.resolve(MOVED);
    if (!Files.exists(journal)) {
      LOG.warn("leaving {}: ramtrain did not write it", previous);
      return;
    }
    List<String> moved = JSON.readValue(journal.toFile(), new TypeReference<List<String>>() {});
    if (!moved.stream().allMatch(RUN_ENTRIES::contains)) {
      throw new IOException(journal + ": names entries that are not a run's: " + moved);
    }
    // The checkpoints move first: if they are not aside, the replacement never began.
    boolean began = Files.exists(previous.resolve(CHECKPOINTS)) || !moved.contains(CHECKPOINTS);
    if (began && Files.exists(run.resolve(CHECKPOINTS).resolve(Checkpoints.LATEST))) {
      deleteTree(previous);
      return;
    }
    for (String name : RUN_ENTRIES) {
      boolean aside = Files.exists(previous.resolve(name));
      if (aside || !moved.contains(name)) {
        deleteTree(run.resolve(name)); // the replacing run's
      }
      if (aside) {
        Files.move(previous.resolve(name), run.resolve(name), StandardCopyOption.ATOMIC_MOVE);
      }
    }
    deleteTree(previous);
    LOG.warn("the run that was to replace {} saved no checkpoint: the previous run is back", run);
  }

  /**
   * Keeps the metrics records up to {@code c} (steps before its step, epochs it completed), so a
   * resumed run's records continue from there instead of repeating a killed epoch's.
   */
  private static void keepMetricsUntil(Path run, Checkpoints.Loaded c) throws IOException {
    List<String> kept = new ArrayList<>();
    int epochs = 0;
    for (String name : List.of(METRICS, LEGACY_RESUMED_METRICS)) {
      Path file = run.resolve(name);
      if (!Files.exists(file)) {
        continue;
      }
      for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
        JsonNode r;
        try {
          r = JSON.readTree(line);
        } catch (IOException e) {
          continue; // the half-written last line of a killed run
        }
        if (r == null) {
          continue;
        }
        boolean keep;
        if (r.path("type").asText().equals("epoch")) {
          keep =
              r.has("step") ? r.path("step").asLong() <= c.globalStep() : epochs < c.epochsDone();
          epochs += keep ? 1 : 0;
        } else {
          keep = r.path("step").asLong(Long.MAX_VALUE) < c.globalStep();
        }
        if (keep) {
          kept.add(line);
        }
      }
    }
    Path tmp = run.resolve("." + METRICS + ".tmp");
    Files.write(tmp, kept, StandardCharsets.UTF_8);
    Files.move(
        tmp,
        run.resolve(METRICS),
        StandardCopyOption.ATOMIC_MOVE,
        StandardCopyOption.REPLACE_EXISTING);
    Files.deleteIfExists(run.resolve(LEGACY_RESUMED_METRICS));
  }

  private static void deleteTree(Path path) throws IOException {
    if (!Files.exists(path)) {
      return;
    }
    try (Stream<Path> walk = Files.walk(path)) {
      for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }
}
