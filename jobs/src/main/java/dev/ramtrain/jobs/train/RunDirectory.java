package dev.ramtrain.jobs.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.etl.dataset.DirectoryLock;
import dev.ramtrain.files.IoErrors;
import dev.ramtrain.files.PausePoints;
import dev.ramtrain.jobs.report.TrainingReport;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.run.RunFolder;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A training run's directory ({@code ramtrain.train.output}): {@code metrics.jsonl}, {@code
 * checkpoints/epoch-NNNN/}, {@code checkpoints/latest}, {@code report/}. One writer at a time
 * ({@link DirectoryLock}). ramtrain moves or deletes only what its {@link RunJournal} records it
 * wrote, and nothing of an earlier run is lost by accident:
 *
 * <ul>
 *   <li>a new run needs a new or empty directory, or one whose run saved no checkpoint (its files,
 *       a failed run's, are removed: a run without a checkpoint is nothing to resume or protect);
 *   <li>{@link Mode#RESUME} continues the run from its latest checkpoint, its metrics cut back to
 *       that checkpoint so they continue from its step;
 *   <li>{@link Mode#OVERWRITE} moves the old run's recorded files aside into {@value #PREVIOUS} and
 *       deletes them only once the new run has saved its first checkpoint. A new run that fails
 *       before then gets the old one put back when it closes; one that is killed, when the
 *       directory is next opened.
 * </ul>
 *
 * A file the journal does not record (a user's {@code checkpoints/export.onnx}, {@code
 * report/slides.pdf}, {@code notes.txt}) is never moved or deleted; one at a path a run writes
 * refuses the run before anything is touched.
 */
public final class RunDirectory implements RunFolder, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RunDirectory.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  public static final String METRICS = "metrics.jsonl";
  static final String LEGACY_RESUMED_METRICS = "metrics-resumed.jsonl"; // before one metrics file
  static final String CHECKPOINTS = "checkpoints";
  static final String REPORT = "report";
  static final String PREVIOUS = "_previous-run";
  static final String MOVED = "_ramtrain-moved.json";

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
  private final RunJournal journal;
  private final Map<String, Object> info = new TreeMap<>();
  private boolean previousPending;
  private CheckpointPublisher publisher;
  private final Thread onInterrupt; // while open: Ctrl-C says where the run stopped, frees the lock
  private int keepCheckpoints; // the newest epoch checkpoints kept besides the best; 0: all

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
      RunJournal journal,
      boolean moved) {
    this.dir = dir;
    this.createdDir = createdDir;
    this.lock = lock;
    this.checkpoint = checkpoint;
    this.journal = journal;
    this.previousPending = moved;
    this.onInterrupt =
        new Thread(new InterruptedRunNotice(dir, lock, System.err), "ramtrain-interrupted-run");
    Runtime.getRuntime().addShutdownHook(onInterrupt);
  }

  /** What a run directory holds: ramtrain's recorded files, and everything else. */
  private record Contents(List<String> recorded, List<String> foreign) {}

  /**
   * Opens {@code dir} for a run in {@code mode}: takes its lock, finishes what a killed run left,
   * and refuses what the mode does not allow (naming {@code ramtrain.train.output}).
   */
  public static RunDirectory open(Path dir, Mode mode) throws IOException {
    return open(dir, mode, 0);
  }

  /**
   * As {@link #open(Path, Mode)}, keeping the newest {@code keepCheckpoints} epoch checkpoints
   * besides the best and the latest (0: every checkpoint), each save and each new best pruning the
   * rest.
   */
  public static RunDirectory open(Path dir, Mode mode, int keepCheckpoints) throws IOException {
    RunDirectory run = openKeepingAll(dir, mode);
    run.keepCheckpoints = keepCheckpoints;
    return run;
  }

  private static RunDirectory openKeepingAll(Path dir, Mode mode) throws IOException {
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
      settlePrevious(run);
      RunJournal journal = RunJournal.of(run);
      Contents contents = contents(run, journal);
      List<String> inTheWay =
          contents.foreign().stream().filter(RunDirectory::writtenByARun).toList();
      if (!inTheWay.isEmpty()) {
        throw new ConfigException(
            "ramtrain.train.output = "
                + run
                + " holds "
                + String.join(", ", inTheWay.subList(0, Math.min(5, inTheWay.size())))
                + ", which ramtrain did not write and a run would replace: move it away or choose"
                + " another directory");
      }
      boolean checkpointed =
          journal.owns(CHECKPOINTS + "/" + Checkpoints.LATEST)
              && Files.exists(run.resolve(CHECKPOINTS).resolve(Checkpoints.LATEST));
      if (mode == Mode.RESUME) {
        if (!checkpointed) {
          throw new ConfigException(
              "--resume: "
                  + run
                  + " has no checkpoint to resume from; leave out --resume to start a new run");
        }
        return new RunDirectory(run, created, lock, Checkpoints.loadLatest(run), journal, false);
      }
      if (checkpointed && mode == Mode.FRESH) {
        throw new ConfigException(
            "ramtrain.train.output = "
                + run
                + " already holds a training run (checkpoints/"
                + Checkpoints.LATEST
                + "): --resume continues it, --overwrite replaces it (the old run is kept"
                + " until the new one has saved its first checkpoint)");
      }
      if (checkpointed) {
        return new RunDirectory(run, created, lock, null, moveAside(run, journal, contents), true);
      }
      if (contents.recorded().isEmpty() && !contents.foreign().isEmpty()) {
        throw new ConfigException(
            "ramtrain.train.output = "
                + run
                + " is not empty and holds no training run ("
                + String.join(
                    ", ", contents.foreign().subList(0, Math.min(5, contents.foreign().size())))
                + "): choose a new or empty directory");
      }
      if (!contents.recorded().isEmpty()) {
        removeRecorded(run, journal, contents.recorded());
        LOG.info(
            "{}: removed what a run that saved no checkpoint left there ({})",
            run,
            String.join(", ", contents.recorded()));
      }
      return new RunDirectory(run, created, lock, null, journal, false);
    } catch (IOException | RuntimeException e) {
      lock.close();
      removeIfEmpty(run, created);
      throw e;
    }
  }

  @Override
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
  @Override
  public MetricsLog metrics() throws IOException {
    journal.record(dir.resolve(METRICS));
    if (checkpoint != null) {
      keepMetricsUntil(dir, journal, checkpoint);
    }
    return new MetricsLog(dir.resolve(METRICS), checkpoint != null);
  }

  /** Has {@code p} hear of every checkpoint saved from now on (a remote copy publishing it). */
  public void afterEachCheckpoint(CheckpointPublisher p) {
    this.publisher = p;
  }

  /** What every checkpoint's state.json records besides the loop's position. */
  @Override
  public void recordInCheckpoints(Map<String, Object> info) {
    this.info.putAll(info);
  }

  @Override
  public Path save(String name, int epochsDone, long globalStep, Checkpoints.Snapshot snapshot)
      throws IOException {
    Path folder = dir.resolve(CHECKPOINTS).resolve(name);
    List<Path> files = new ArrayList<>();
    for (String file : Checkpoints.FILES) {
      files.add(folder.resolve(file));
    }
    if (!snapshot.averaged().isEmpty()) { // --ema's: recorded only where it is written
      files.add(folder.resolve(Checkpoints.AVERAGED));
    }
    files.add(dir.resolve(CHECKPOINTS).resolve(Checkpoints.LATEST));
    journal.record(files.toArray(Path[]::new));
    Path saved = Checkpoints.save(dir, name, epochsDone, globalStep, snapshot, info);
    pruneCheckpoints();
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
    journal.record(dir.resolve(CHECKPOINTS).resolve(Checkpoints.BEST));
    Checkpoints.point(dir, Checkpoints.BEST, name);
    pruneCheckpoints();
    if (publisher != null) {
      publisher.publishBest(name);
    }
  }

  /**
   * Removes the checkpoint folders the run no longer keeps: every one but the latest, the best and
   * the newest {@link #keepCheckpoints} epoch checkpoints (so a step checkpoint goes once the next
   * is saved). Only folders whose every file the journal records: a folder holding anything else is
   * left, and said so.
   */
  private void pruneCheckpoints() throws IOException {
    if (keepCheckpoints == 0) {
      return;
    }
    Path root = dir.resolve(CHECKPOINTS);
    List<String> names;
    try (Stream<Path> folders = Files.list(root)) {
      names = folders.map(p -> p.getFileName().toString()).toList();
    }
    List<String> dropped =
        CheckpointRetention.dropped(
            names,
            keepCheckpoints,
            pointer(root, Checkpoints.LATEST),
            pointer(root, Checkpoints.BEST));
    for (String name : dropped) {
      Path folder = root.resolve(name);
      if (Files.isSymbolicLink(folder)) {
        LOG.warn("{}: a link ramtrain did not make; left as it is", folder);
        continue;
      }
      List<Path> files;
      try (Stream<Path> inside = Files.list(folder)) {
        files = inside.toList();
      }
      if (!files.stream()
          .allMatch(f -> Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS) && journal.owns(f))) {
        LOG.warn("{}: holds files ramtrain did not write; left as it is", folder);
        continue;
      }
      java.util.Set<String> gone = new TreeSet<>();
      for (Path f : files) {
        gone.add(journal.relative(f));
        Files.delete(f);
      }
      Files.delete(folder);
      journal.forget(gone);
    }
  }

  /** The checkpoint {@code root/pointer} names, or null. */
  private static String pointer(Path root, String pointer) throws IOException {
    Path file = root.resolve(pointer);
    return Files.isRegularFile(file)
        ? Files.readString(file, StandardCharsets.UTF_8).strip()
        : null;
  }

  /** Puts a replaced run back if this one saved no checkpoint, then releases the directory. */
  @Override
  public void close() {
    try {
      Runtime.getRuntime().removeShutdownHook(onInterrupt);
    } catch (IllegalStateException e) {
      // the JVM is shutting down: the hook has run or runs now
    }
    try {
      if (previousPending) {
        settlePrevious(dir);
      }
    } catch (IOException e) {
      LOG.error(
          "could not put the replaced run back from {}: {}", dir.resolve(PREVIOUS), e.toString());
    } finally {
      lock.close();
      if (createdDir) {
        removeIfNoCheckpoint(dir, journal);
      }
      removeIfEmpty(dir, createdDir);
    }
  }

  /**
   * A run that created its directory and stopped before its first checkpoint (a NaN loss, a refused
   * batch, Ctrl-C) leaves nothing to resume from: the files its journal records (the metrics of the
   * steps it ran) go, then the journal, so the directory goes too; a file it did not write keeps
   * the directory as it is.
   */
  private static void removeIfNoCheckpoint(Path dir, RunJournal journal) {
    if (Files.exists(dir.resolve(CHECKPOINTS).resolve(Checkpoints.LATEST))) {
      return;
    }
    try {
      Contents contents = contents(dir, journal);
      removeRecorded(dir, journal, contents.recorded());
      if (contents.foreign().isEmpty()) {
        Files.deleteIfExists(dir.resolve(RunJournal.FILE));
      }
    } catch (IOException e) {
      LOG.warn("could not remove what the stopped run wrote in {}: {}", dir, e.toString());
    }
  }

  /**
   * Whether a run writes the file at {@code relative}: its metrics, checkpoint folders and
   * pointers, and the report's own files.
   */
  static boolean writtenByARun(String relative) {
    String[] parts = relative.split("/");
    String first = parts[0];
    if (parts.length == 1) {
      return first.equals(METRICS) || first.equals(LEGACY_RESUMED_METRICS);
    }
    String second =
        parts[1].endsWith(".tmp") ? parts[1].substring(0, parts[1].length() - 4) : parts[1];
    if (first.equals(CHECKPOINTS)) {
      return second.equals(Checkpoints.LATEST)
          || second.equals(Checkpoints.BEST)
          || Checkpoints.isName(second);
    }
    return first.equals(REPORT) && parts.length == 2 && TrainingReport.writes(parts[1]);
  }

  /** The run directory's files (walked), ramtrain's bookkeeping left out. */
  private static Contents contents(Path run, RunJournal journal) throws IOException {
    List<String> recorded = new ArrayList<>();
    List<String> foreign = new ArrayList<>();
    try (Stream<Path> walk = Files.walk(run)) {
      for (Path p : walk.sorted().toList()) {
        if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
          continue;
        }
        String relative = journal.relative(p);
        if (relative.equals(DirectoryLock.FILE)
            || relative.equals(RunJournal.FILE)
            || relative.equals("." + RunJournal.FILE + ".tmp")
            || relative.startsWith(PREVIOUS + "/")) {
          continue;
        }
        (journal.owns(relative) ? recorded : foreign).add(relative);
      }
    }
    return new Contents(recorded, foreign);
  }

  /** Deletes {@code files} the journal records, then the folders they leave empty. */
  private static void removeRecorded(Path run, RunJournal journal, List<String> files)
      throws IOException {
    for (String relative : files) {
      Path file = run.resolve(relative);
      Files.deleteIfExists(file);
      removeEmptyFolders(run, file.getParent());
    }
    journal.forget(new TreeSet<>(files));
  }

  /** Removes {@code folder} and the folders above it, up to {@code run}, while they are empty. */
  private static void removeEmptyFolders(Path run, Path folder) throws IOException {
    for (Path f = folder; f != null && !f.equals(run) && f.startsWith(run); f = f.getParent()) {
      try (Stream<Path> entries = Files.list(f)) {
        if (entries.findAny().isPresent()) {
          return;
        }
      }
      Files.delete(f);
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

  /**
   * Moves a run's recorded files into {@value #PREVIOUS} (their paths kept), its journal with them,
   * noting first what moves and the journal's id; returns the new run's journal.
   */
  private static RunJournal moveAside(Path run, RunJournal journal, Contents contents)
      throws IOException {
    Path previous = run.resolve(PREVIOUS);
    Files.createDirectories(previous);
    Map<String, Object> moved = new TreeMap<>();
    moved.put("journal", journal.id());
    moved.put("moved", contents.recorded());
    Files.write(previous.resolve(MOVED), JSON.writeValueAsBytes(moved));
    Files.move(
        run.resolve(RunJournal.FILE),
        previous.resolve(RunJournal.FILE),
        StandardCopyOption.ATOMIC_MOVE);
    for (String relative : contents.recorded()) {
      Path target = previous.resolve(relative);
      Files.createDirectories(target.getParent());
      Files.move(run.resolve(relative), target, StandardCopyOption.ATOMIC_MOVE);
      removeEmptyFolders(run, run.resolve(relative).getParent());
    }
    PausePoints.reach("overwrite.moved-aside");
    LOG.info("moved the run in {} aside until the new run has its first checkpoint", run);
    return RunJournal.of(run);
  }

  /**
   * Settles a replacement that did not finish: with a checkpoint of the new run the old run's files
   * go; without one, the new run's recorded files go and the old run's come back.
   */
  private static void settlePrevious(Path run) throws IOException {
    Path previous = run.resolve(PREVIOUS);
    if (!Files.isDirectory(previous)) {
      return;
    }
    Path note = previous.resolve(MOVED);
    if (!Files.exists(note)) {
      LOG.warn("leaving {}: ramtrain did not write it", previous);
      return;
    }
    JsonNode moved = JSON.readTree(note.toFile());
    if (moved == null || !moved.path("journal").isTextual() || !moved.path("moved").isArray()) {
      throw new IOException(note + ": not ramtrain's record of a run moved aside");
    }
    String oldJournal = moved.path("journal").asText();
    List<String> paths = new ArrayList<>();
    for (JsonNode p : moved.path("moved")) {
      paths.add(RunJournal.checked(note, p.asText(null)));
    }
    RunJournal current = Files.exists(run.resolve(RunJournal.FILE)) ? RunJournal.of(run) : null;
    boolean replacing = current != null && !current.id().equals(oldJournal);
    if (replacing
        && current.owns(CHECKPOINTS + "/" + Checkpoints.LATEST)
        && Files.exists(run.resolve(CHECKPOINTS).resolve(Checkpoints.LATEST))) {
      deleteTree(previous);
      return;
    }
    if (replacing) { // the replacing run's files go, its journal last
      removeRecorded(run, current, contents(run, current).recorded());
      Files.delete(run.resolve(RunJournal.FILE));
    }
    for (String relative : paths) {
      Path aside = previous.resolve(relative);
      if (Files.exists(aside, LinkOption.NOFOLLOW_LINKS)) {
        Files.createDirectories(run.resolve(relative).getParent());
        Files.move(aside, run.resolve(relative), StandardCopyOption.ATOMIC_MOVE);
      }
    }
    if (Files.exists(previous.resolve(RunJournal.FILE))) {
      Files.move(
          previous.resolve(RunJournal.FILE),
          run.resolve(RunJournal.FILE),
          StandardCopyOption.ATOMIC_MOVE);
    }
    deleteTree(previous);
    LOG.warn("the run that was to replace {} saved no checkpoint: the previous run is back", run);
  }

  /**
   * Keeps the metrics records up to {@code c} (steps before its step, epochs it completed), so a
   * resumed run's records continue from there instead of repeating a killed epoch's.
   */
  private static void keepMetricsUntil(Path run, RunJournal journal, Checkpoints.Loaded c)
      throws IOException {
    List<String> kept = new ArrayList<>();
    int epochs = 0;
    for (String name : List.of(METRICS, LEGACY_RESUMED_METRICS)) {
      Path file = run.resolve(name);
      if (!Files.exists(file) || !journal.owns(name)) {
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
    Path tmp = run.resolve(METRICS + ".tmp");
    Files.write(tmp, kept, StandardCharsets.UTF_8);
    Files.move(
        tmp,
        run.resolve(METRICS),
        StandardCopyOption.ATOMIC_MOVE,
        StandardCopyOption.REPLACE_EXISTING);
    if (journal.owns(LEGACY_RESUMED_METRICS)) {
      Files.deleteIfExists(run.resolve(LEGACY_RESUMED_METRICS));
    }
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
