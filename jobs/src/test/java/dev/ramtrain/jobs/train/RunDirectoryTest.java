package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.etl.TestFiles;
import dev.ramtrain.etl.dataset.DirectoryLock;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.MetricsLog;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RunDirectoryTest {
  @TempDir Path tmp;

  private static Checkpoints.Snapshot snapshot(float value) {
    return new Checkpoints.Snapshot(
        "mlp:1-1",
        List.of(new Safetensors.Tensor("fc1.weight", new long[] {1}, new float[] {value})),
        List.of(),
        3);
  }

  /** A finished run of {@code epochs} epochs of 10 steps, written as ramtrain writes one. */
  private static void oldRun(Path dir, int epochs) throws Exception {
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.FRESH);
        MetricsLog metrics = run.metrics()) {
      for (int e = 1; e <= epochs; e++) {
        for (int step = (e - 1) * 10; step < e * 10; step++) {
          metrics.write(record("step", e, step));
        }
        metrics.write(record("epoch", e, e * 10));
        run.save(Checkpoints.name(e, e * 10L, true), e, e * 10L, snapshot(e));
      }
    }
    Path index = dir.resolve("report/index.html");
    Files.createDirectories(index.getParent());
    RunJournal.of(dir).claim(index);
    Files.writeString(index, "<html>old</html>");
  }

  private static Map<String, Object> record(String type, int epoch, long step) {
    Map<String, Object> r = new TreeMap<>();
    r.put("type", type);
    r.put("epoch", epoch);
    r.put("step", step);
    return r;
  }

  /** The files under {@code dir} with their bytes (folders left out). */
  private static Map<String, String> snapshotOf(Path dir) throws Exception {
    Map<String, String> files = new TreeMap<>(TestFiles.contents(dir));
    files.values().removeIf("folder"::equals);
    return files;
  }

  /** The checkpoint folders under {@code dir}/checkpoints, sorted. */
  private static List<String> checkpointFolders(Path dir) throws Exception {
    try (var folders = Files.list(dir.resolve("checkpoints"))) {
      return folders
          .filter(Files::isDirectory)
          .map(p -> p.getFileName().toString())
          .sorted()
          .toList();
    }
  }

  /**
   * A run keeps the latest, the best and the newest N epoch checkpoints: each save and each new
   * best removes the rest, a step checkpoint once the next is saved; a folder holding a file
   * ramtrain did not write stays; resume reads the latest.
   */
  @Test
  void checkpointsBeyondTheLatestTheBestAndTheNewestNAreRemoved() throws Exception {
    Path dir = tmp.resolve("pruned");
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.FRESH, 1)) {
      run.save(Checkpoints.name(1, 10, true), 1, 10, snapshot(1));
      run.markBest(Checkpoints.name(1, 10, true));
      run.save(Checkpoints.name(1, 15, false), 1, 15, snapshot(1.5f));
      assertEquals(List.of("epoch-0001", "step-000000015"), checkpointFolders(dir));
      run.save(Checkpoints.name(2, 20, true), 2, 20, snapshot(2));
      assertEquals(List.of("epoch-0001", "epoch-0002"), checkpointFolders(dir), "the step's gone");
      run.save(Checkpoints.name(3, 30, true), 3, 30, snapshot(3));
      assertEquals(List.of("epoch-0001", "epoch-0003"), checkpointFolders(dir), "1 is the best");
      Files.writeString(dir.resolve("checkpoints/epoch-0003/notes.txt"), "mine");
      run.save(Checkpoints.name(4, 40, true), 4, 40, snapshot(4));
      run.markBest(Checkpoints.name(4, 40, true));
      assertEquals(
          List.of("epoch-0003", "epoch-0004"), checkpointFolders(dir), "a user's file keeps 3");
      assertFalse(RunJournal.of(dir).owns("checkpoints/epoch-0001/model.safetensors"));
    }
    Files.delete(dir.resolve("checkpoints/epoch-0003/notes.txt")); // a resume refuses it
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.RESUME, 1)) {
      assertEquals(4, run.checkpoint().state().get("epochs_done"));
    }
    Path all = tmp.resolve("all");
    try (RunDirectory run = RunDirectory.open(all, RunDirectory.Mode.FRESH, 0)) {
      for (int e = 1; e <= 3; e++) {
        run.save(Checkpoints.name(e, e * 10L, true), e, e * 10L, snapshot(e));
      }
    }
    assertEquals(List.of("epoch-0001", "epoch-0002", "epoch-0003"), checkpointFolders(all));
  }

  /**
   * A checkpoint folder replaced by a link to a user's folder is never pruned through: the link and
   * every file behind it stay, although their names are those the journal records.
   */
  @Test
  void pruningNeverFollowsALinkToAUsersFolder() throws Exception {
    Path dir = tmp.resolve("linked");
    Path mine = Files.createDirectories(tmp.resolve("mine"));
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.FRESH, 1)) {
      run.save(Checkpoints.name(1, 10, true), 1, 10, snapshot(1));
      run.markBest(Checkpoints.name(1, 10, true));
      run.save(Checkpoints.name(2, 20, true), 2, 20, snapshot(2));
      Path second = dir.resolve("checkpoints/epoch-0002");
      for (String file : Checkpoints.FILES) {
        Files.move(second.resolve(file), mine.resolve(file));
      }
      Files.delete(second);
      Files.createSymbolicLink(second, mine);
      run.save(Checkpoints.name(3, 30, true), 3, 30, snapshot(3));
      assertTrue(Files.isSymbolicLink(second));
      for (String file : Checkpoints.FILES) {
        assertTrue(Files.exists(mine.resolve(file)), file);
      }
    }
  }

  @Test
  void aNewRunNeedsANewOrEmptyDirectory() throws Exception {
    Path dir = tmp.resolve("run");
    oldRun(dir, 2);
    Map<String, String> before = snapshotOf(dir);
    var e =
        assertThrows(ConfigException.class, () -> RunDirectory.open(dir, RunDirectory.Mode.FRESH));
    assertTrue(
        e.getMessage().contains("ramtrain.train.output")
            && e.getMessage().contains("already holds a training run")
            && e.getMessage().contains("--resume")
            && e.getMessage().contains("--overwrite"),
        e.getMessage());
    assertEquals(before, snapshotOf(dir), "nothing of the old run was touched");

    Path mine = tmp.resolve("mine");
    Files.createDirectories(mine);
    Files.writeString(mine.resolve("thesis.tex"), "\\documentclass{article}");
    for (RunDirectory.Mode mode : List.of(RunDirectory.Mode.FRESH, RunDirectory.Mode.OVERWRITE)) {
      var foreign = assertThrows(ConfigException.class, () -> RunDirectory.open(mine, mode));
      assertTrue(foreign.getMessage().contains("holds no training run"), foreign.getMessage());
    }
    assertEquals(List.of("thesis.tex"), List.of(mine.toFile().list()));
  }

  @Test
  void anOverwriteKeepsTheOldRunUntilTheNewOneHasACheckpoint() throws Exception {
    Path dir = tmp.resolve("run");
    oldRun(dir, 3);
    Map<String, String> old = snapshotOf(dir);
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.OVERWRITE);
        MetricsLog metrics = run.metrics()) {
      metrics.write(record("step", 1, 0));
      Map<String, String> aside = new TreeMap<>();
      snapshotOf(dir.resolve(RunDirectory.PREVIOUS))
          .forEach(
              (k, v) -> {
                if (!k.equals(RunDirectory.MOVED)) {
                  aside.put(k, v);
                }
              });
      assertEquals(old, aside, "the old run is whole, aside, with its journal");
      run.save(Checkpoints.name(1, 10, true), 1, 10, snapshot(42));
      assertFalse(
          Files.exists(dir.resolve(RunDirectory.PREVIOUS)), "gone after the first checkpoint");
    }
    assertEquals(
        List.of("epoch-0001", "latest"),
        Arrays.stream(dir.resolve("checkpoints").toFile().list()).sorted().toList());
    assertEquals(
        42f, Checkpoints.loadLatest(dir).weights().get("fc1.weight").values()[0], "the new run's");
    assertFalse(Files.exists(dir.resolve("report")), "the old report went with the old run");
  }

  @Test
  void anOverwriteThatFailsBeforeItsFirstCheckpointPutsTheOldRunBack() throws Exception {
    Path dir = tmp.resolve("run");
    oldRun(dir, 2);
    Map<String, String> old = snapshotOf(dir);
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.OVERWRITE);
        MetricsLog metrics = run.metrics()) {
      metrics.write(record("step", 1, 0)); // then the new run fails at step 1
    }
    assertEquals(old, snapshotOf(dir));
  }

  /** The state an overwrite of {@code dir} leaves once it has moved {@code which} aside. */
  private static Path movedAside(Path dir, List<String> which) throws Exception {
    RunJournal old = RunJournal.of(dir);
    Path previous = dir.resolve(RunDirectory.PREVIOUS);
    Files.createDirectories(previous);
    Files.writeString(
        previous.resolve(RunDirectory.MOVED),
        new ObjectMapper().writeValueAsString(Map.of("journal", old.id(), "moved", old.written())));
    Files.move(dir.resolve(RunJournal.FILE), previous.resolve(RunJournal.FILE));
    for (String relative : which) {
      Files.createDirectories(previous.resolve(relative).getParent());
      Files.move(dir.resolve(relative), previous.resolve(relative));
    }
    return previous;
  }

  @Test
  void anOverwriteKilledAnywhereIsSettledByTheNextOpen() throws Exception {
    Path dir = tmp.resolve("run");
    oldRun(dir, 2);
    Map<String, String> old = snapshotOf(dir);
    List<String> checkpointFiles =
        RunJournal.of(dir).written().stream().filter(f -> f.startsWith("checkpoints/")).toList();

    // Killed after moving the checkpoints aside, before the metrics: the new run never began.
    movedAside(dir, checkpointFiles);
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.RESUME)) {
      assertEquals(2, run.checkpoint().epochsDone(), "the old run is back, and resumes");
    }
    assertEquals(old.keySet(), snapshotOf(dir).keySet());

    // Killed while the new run trained, before its first checkpoint.
    List<String> all = new ArrayList<>(RunJournal.of(dir).written());
    movedAside(dir, all);
    RunJournal replacing = RunJournal.of(dir);
    replacing.record(
        dir.resolve("metrics.jsonl"), dir.resolve("checkpoints/epoch-0001/state.json"));
    Files.writeString(dir.resolve("metrics.jsonl"), "{\"type\":\"step\",\"step\":0}\n{\"ty");
    Files.createDirectories(dir.resolve("checkpoints/epoch-0001.tmp"));
    Files.writeString(dir.resolve("checkpoints/epoch-0001.tmp/state.json"), "{");
    var e =
        assertThrows(ConfigException.class, () -> RunDirectory.open(dir, RunDirectory.Mode.FRESH));
    assertTrue(e.getMessage().contains("already holds a training run"), e.getMessage());
    assertEquals(old, snapshotOf(dir), "the old run's files are back, the new run's gone");

    // Killed after the new run's first checkpoint, before the old run was deleted.
    movedAside(dir, new ArrayList<>(RunJournal.of(dir).written()));
    RunJournal newRun = RunJournal.of(dir);
    List<Path> files = new ArrayList<>();
    for (String f : Checkpoints.FILES) {
      files.add(dir.resolve("checkpoints/epoch-0001").resolve(f));
    }
    files.add(dir.resolve("checkpoints/latest"));
    newRun.record(files.toArray(Path[]::new));
    Checkpoints.save(dir, 1, 10, snapshot(7), Map.of());
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.RESUME)) {
      assertEquals(7f, run.checkpoint().weights().get("fc1.weight").values()[0], "the new run's");
    }
    assertFalse(Files.exists(dir.resolve(RunDirectory.PREVIOUS)));
    assertFalse(Files.exists(dir.resolve("report/index.html")), "the old run's report is gone");
  }

  /**
   * Files ramtrain did not write stay where they are, whatever their names: beside an old run that
   * a new one replaces, in a directory that holds no run, and in one whose run saved no checkpoint.
   */
  @Test
  void filesRamtrainDidNotWriteStayWhateverTheirNames() throws Exception {
    Path dir = tmp.resolve("run");
    oldRun(dir, 2);
    Map<String, String> mine =
        Map.of(
            "checkpoints/export.onnx", "onnx",
            "checkpoints/model.pt", "pt",
            "report/slides.pdf", "pdf",
            "notes.txt", "notes");
    for (var f : mine.entrySet()) {
      Files.writeString(dir.resolve(f.getKey()), f.getValue());
    }
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.OVERWRITE);
        MetricsLog metrics = run.metrics()) {
      metrics.write(record("step", 1, 0));
      run.save(Checkpoints.name(1, 10, true), 1, 10, snapshot(42));
    }
    for (var f : mine.entrySet()) {
      assertEquals(
          f.getValue(), Files.readString(dir.resolve(f.getKey())), f + " survives the overwrite");
    }
    Map<String, String> now = snapshotOf(dir);
    assertFalse(now.containsKey("checkpoints/epoch-0002/state.json"), "the old run is gone");
    assertFalse(now.containsKey("report/index.html"), "its report too");

    // The case: a folder with only a checkpoints/model.pt is no run to overwrite.
    Path other = tmp.resolve("other");
    Files.createDirectories(other.resolve("checkpoints"));
    Files.writeString(other.resolve("checkpoints/model.pt"), "w");
    var e =
        assertThrows(
            ConfigException.class, () -> RunDirectory.open(other, RunDirectory.Mode.OVERWRITE));
    assertTrue(e.getMessage().contains("holds no training run"), e.getMessage());
    assertEquals("w", Files.readString(other.resolve("checkpoints/model.pt")));
  }

  /** A user's file where a run writes refuses the run before anything is touched, naming it. */
  @Test
  void aFileAtAPathARunWritesRefusesTheRun() throws Exception {
    for (String inTheWay :
        List.of(
            "checkpoints/epoch-0003/state.json",
            "checkpoints/step-000000015.tmp/x",
            "report/loss.png",
            "metrics-resumed.jsonl")) {
      Path dir = tmp.resolve("run-" + inTheWay.replace('/', '-'));
      oldRun(dir, 2);
      Files.createDirectories(dir.resolve(inTheWay).getParent());
      Files.writeString(dir.resolve(inTheWay), "mine");
      Map<String, String> before = snapshotOf(dir);
      for (RunDirectory.Mode mode : RunDirectory.Mode.values()) {
        var e = assertThrows(ConfigException.class, () -> RunDirectory.open(dir, mode));
        assertTrue(
            e.getMessage().contains(inTheWay + ", which ramtrain did not write"), e.getMessage());
      }
      assertEquals(before, snapshotOf(dir), "nothing touched");
    }
  }

  /**
   * A new run that failed before its first checkpoint left its metrics: that is no run to resume or
   * protect, so a new run takes the directory (removing them), and --resume says there is nothing
   * to resume. The two messages no longer send the user in a circle.
   */
  @Test
  void aRunThatSavedNoCheckpointIsNoRunToProtect() throws Exception {
    Path dir = Files.createDirectory(tmp.resolve("run")); // the user's: the run leaves it
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.FRESH);
        MetricsLog metrics = run.metrics()) {
      metrics.write(record("step", 1, 0)); // then the loss is NaN
    }
    Files.writeString(dir.resolve("notes.txt"), "mine");
    var resume =
        assertThrows(ConfigException.class, () -> RunDirectory.open(dir, RunDirectory.Mode.RESUME));
    assertTrue(resume.getMessage().contains("leave out --resume"), resume.getMessage());
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.FRESH)) {
      assertFalse(Files.exists(dir.resolve("metrics.jsonl")), "the failed run's metrics are gone");
    }
    assertEquals("mine", Files.readString(dir.resolve("notes.txt")));
  }

  /**
   * A run that created its directory and stopped before its first checkpoint (a NaN loss at step 1)
   * removes what it wrote and the directory: nothing is left half-written to resume from; one that
   * saved a checkpoint keeps everything.
   */
  @Test
  void aRunThatCreatedItsDirectoryAndSavedNoCheckpointLeavesNothing() throws Exception {
    Path dir = tmp.resolve("new-run");
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.FRESH);
        MetricsLog metrics = run.metrics()) {
      metrics.write(record("step", 1, 0)); // then the loss is NaN
    }
    assertFalse(Files.exists(dir), "the stopped run's directory is gone");
    Path shared = tmp.resolve("shared-run");
    try (RunDirectory run = RunDirectory.open(shared, RunDirectory.Mode.FRESH);
        MetricsLog metrics = run.metrics()) {
      metrics.write(record("step", 1, 0));
      Files.writeString(shared.resolve("notes.txt"), "mine"); // a user's file, while it ran
    }
    assertEquals("mine", Files.readString(shared.resolve("notes.txt")), "never a user's file");
    assertFalse(Files.exists(shared.resolve("metrics.jsonl")), "only what the run wrote went");
    Path kept = tmp.resolve("kept");
    oldRun(kept, 1);
    assertTrue(Files.exists(kept.resolve("metrics.jsonl")), "a run with a checkpoint stays");
  }

  /** A run named by a relative path (train -o run) records its files by their place in the run. */
  @Test
  void aRelativeRunPathRecordsPathsInsideTheRun() throws Exception {
    Path relative = Path.of("").toAbsolutePath().relativize(tmp.resolve("run"));
    assertFalse(relative.isAbsolute());
    Files.createDirectories(relative.resolve("report"));
    RunJournal.of(relative).claim(relative.resolve("report/loss.png"));
    assertEquals(java.util.Set.of("report/loss.png"), RunJournal.of(tmp.resolve("run")).written());
    assertTrue(RunJournal.of(relative).owns(relative.resolve("report/loss.png")));
  }

  /** A journal naming a path outside the run is refused before anything is moved or deleted. */
  @Test
  void aHostileJournalIsRefused() throws Exception {
    Path dir = tmp.resolve("run");
    Files.createDirectories(dir);
    Path victim = tmp.resolve("victim.txt");
    Files.writeString(victim, "keep");
    for (String entry : List.of("../victim.txt", "/etc/passwd", "a/../../victim.txt", "")) {
      Files.writeString(
          dir.resolve(RunJournal.FILE),
          new ObjectMapper().writeValueAsString(Map.of("id", "x", "written", List.of(entry))));
      var e =
          assertThrows(
              java.io.IOException.class, () -> RunDirectory.open(dir, RunDirectory.Mode.OVERWRITE));
      assertTrue(e.getMessage().contains(RunJournal.FILE), e.getMessage());
    }
    assertEquals("keep", Files.readString(victim));
  }

  @Test
  void aResumedRunsMetricsContinueFromItsCheckpoint() throws Exception {
    Path dir = tmp.resolve("run");
    oldRun(dir, 2);
    // The run went on into epoch 3 and was killed at step 27, after checkpoint epoch-0002.
    try (MetricsLog metrics = new MetricsLog(dir.resolve("metrics.jsonl"), true)) {
      for (int step = 20; step < 27; step++) {
        metrics.write(record("step", 3, step));
      }
    }
    Files.writeString(
        dir.resolve("metrics.jsonl"), "{\"type\":\"st", java.nio.file.StandardOpenOption.APPEND);
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.RESUME);
        MetricsLog metrics = run.metrics()) {
      assertEquals(20, run.checkpoint().globalStep());
      metrics.write(record("step", 3, 20));
    }
    List<Long> steps = new ArrayList<>();
    for (String line : Files.readAllLines(dir.resolve("metrics.jsonl"))) {
      if (line.contains("\"type\":\"step\"")) {
        steps.add(Long.parseLong(line.replaceAll(".*\"step\":(\\d+).*", "$1")));
      }
    }
    List<Long> expected = new ArrayList<>();
    for (long s = 0; s <= 20; s++) {
      expected.add(s);
    }
    assertEquals(expected, steps, "each step once: no killed epoch drawn twice");
  }

  @Test
  void oneWriterAtATime() throws Exception {
    Path dir = tmp.resolve("run");
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.FRESH)) {
      var e =
          assertThrows(
              DirectoryLock.LockedException.class,
              () -> RunDirectory.open(dir, RunDirectory.Mode.OVERWRITE));
      assertTrue(e.getMessage().contains("train"), e.getMessage());
    }
    assertFalse(Files.exists(dir), "a run directory this run made and left empty is removed");
    assertThrows(ConfigException.class, () -> RunDirectory.Mode.of(true, true));
  }
}
