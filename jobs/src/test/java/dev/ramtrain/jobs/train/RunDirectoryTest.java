package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.TestFiles;
import dev.ramtrain.etl.dataset.DirectoryLock;
import dev.ramtrain.jobs.config.ConfigException;
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
    Files.createDirectories(dir.resolve("report"));
    Files.writeString(dir.resolve("report/index.html"), "<html>old</html>");
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
      assertEquals(old, aside, "the old run is whole, aside");
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

  @Test
  void anOverwriteKilledAnywhereIsSettledByTheNextOpen() throws Exception {
    Path dir = tmp.resolve("run");
    oldRun(dir, 2);
    Map<String, String> old = snapshotOf(dir);

    // Killed after moving the checkpoints aside, before the metrics: the new run never began.
    Path previous = dir.resolve(RunDirectory.PREVIOUS);
    Files.createDirectories(previous);
    Files.writeString(
        previous.resolve(RunDirectory.MOVED), "[\"checkpoints\",\"metrics.jsonl\",\"report\"]");
    Files.move(dir.resolve("checkpoints"), previous.resolve("checkpoints"));
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.RESUME)) {
      assertEquals(2, run.checkpoint().epochsDone(), "the old run is back, and resumes");
    }
    assertEquals(old.keySet(), snapshotOf(dir).keySet());

    // Killed while the new run trained, before its first checkpoint.
    Files.createDirectories(previous);
    Files.writeString(
        previous.resolve(RunDirectory.MOVED), "[\"checkpoints\",\"metrics.jsonl\",\"report\"]");
    for (String name : List.of("checkpoints", "metrics.jsonl", "report")) {
      Files.move(dir.resolve(name), previous.resolve(name));
    }
    Files.writeString(dir.resolve("metrics.jsonl"), "{\"type\":\"step\",\"step\":0}\n{\"ty");
    Files.createDirectories(dir.resolve("checkpoints/epoch-0001.tmp"));
    var e =
        assertThrows(ConfigException.class, () -> RunDirectory.open(dir, RunDirectory.Mode.FRESH));
    assertTrue(e.getMessage().contains("already holds a training run"), e.getMessage());
    Map<String, String> now = snapshotOf(dir);
    now.keySet().removeIf(k -> k.startsWith("metrics"));
    Map<String, String> expected = new TreeMap<>(old);
    expected.keySet().removeIf(k -> k.startsWith("metrics"));
    assertEquals(expected, now, "the old run's files are back");
    assertEquals(old.get("metrics.jsonl"), snapshotOf(dir).get("metrics.jsonl"));

    // Killed after the new run's first checkpoint, before the old run was deleted.
    Files.createDirectories(previous);
    Files.writeString(previous.resolve(RunDirectory.MOVED), "[\"checkpoints\",\"metrics.jsonl\"]");
    Files.move(dir.resolve("checkpoints"), previous.resolve("checkpoints"));
    Files.move(dir.resolve("metrics.jsonl"), previous.resolve("metrics.jsonl"));
    Checkpoints.save(dir, 1, 10, snapshot(7), Map.of());
    try (RunDirectory run = RunDirectory.open(dir, RunDirectory.Mode.RESUME)) {
      assertEquals(7f, run.checkpoint().weights().get("fc1.weight").values()[0], "the new run's");
    }
    assertFalse(Files.exists(previous));
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
