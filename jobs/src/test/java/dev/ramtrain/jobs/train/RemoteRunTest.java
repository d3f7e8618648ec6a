package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.settings.ConfigException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a remote run directory (the tests' remote: filesystem, reached only through Hadoop) lets a
 * run do: a new run needs one without a run; the retry of the job that started it may clear what
 * that job published; nothing else there is touched, and the local staging copy goes on close.
 */
class RemoteRunTest {
  @TempDir Path tmp;

  private JobSpec.Output output(Path dir, RunDirectory.Mode mode) {
    return new JobSpec.Output("remote://" + dir, mode, false, 0, 0);
  }

  @Test
  void onlyTheJobThatStartedARunMayStartItAgain() throws Exception {
    Path dir = tmp.resolve("run");
    Configuration conf = new Configuration();
    JobSpec.Output fresh = output(dir, RunDirectory.Mode.FRESH);
    assertTrue(fresh.remote());
    Path staging;
    try (RemoteRun first = RemoteRun.open(fresh, conf, "job-a")) {
      staging = first.staging();
      assertTrue(Files.isDirectory(staging));
    }
    assertFalse(Files.exists(staging), "the staging copy goes on close");
    // What job A's failed attempt published, and a file that is not a run's.
    Files.writeString(dir.resolve(RunDirectory.METRICS), "{\"type\":\"epoch\"}\n");
    Files.writeString(dir.resolve("notes.txt"), "mine");

    ConfigException other =
        assertThrows(ConfigException.class, () -> RemoteRun.open(fresh, conf, "job-b").close());
    assertTrue(other.getMessage().contains("already holds a training run"), other.getMessage());
    assertTrue(
        Files.exists(dir.resolve(RunDirectory.METRICS)), "another job's refusal deletes nothing");

    try (RemoteRun retry = RemoteRun.open(fresh, conf, "job-a")) {
      assertFalse(Files.exists(dir.resolve(RunDirectory.METRICS)), "the job's own attempt cleared");
    }
    assertEquals("mine", Files.readString(dir.resolve("notes.txt")));

    assertThrows(
        ConfigException.class,
        () -> RemoteRun.open(output(dir, RunDirectory.Mode.OVERWRITE), conf, "job-a").close());
    ConfigException nothingToResume =
        assertThrows(
            ConfigException.class,
            () -> RemoteRun.open(output(dir, RunDirectory.Mode.RESUME), conf, "job-c").close());
    assertTrue(
        nothingToResume.getMessage().contains("no checkpoint"), nothingToResume.getMessage());
    // A refused run leaves no directory it made behind.
    Path never = tmp.resolve("never");
    assertThrows(
        ConfigException.class,
        () -> RemoteRun.open(output(never, RunDirectory.Mode.RESUME), conf, "job-d").close());
    assertFalse(Files.exists(never));
  }

  /**
   * Publishing replaces only the checkpoint's own folder and the run's pointers: the folder under a
   * temporary name then renamed, checkpoints/latest last; anything else in the run stays.
   */
  @Test
  void publishingACheckpointTouchesOnlyItsOwnFiles() throws Exception {
    Path dir = tmp.resolve("published");
    Configuration conf = new Configuration();
    try (RemoteRun run = RemoteRun.open(output(dir, RunDirectory.Mode.FRESH), conf, "job-a")) {
      Files.createDirectories(dir.resolve("checkpoints"));
      Files.writeString(dir.resolve("checkpoints/notes.txt"), "mine");
      Path saved = Files.createDirectories(run.staging().resolve("checkpoints/epoch-0001"));
      Files.writeString(saved.resolve("state.json"), "{}");
      Files.writeString(run.staging().resolve(RunDirectory.METRICS), "{\"type\":\"epoch\"}\n");
      run.publish(saved);
      run.publish(saved); // a retry publishing the same checkpoint again replaces its own folder
    }
    assertEquals("{}", Files.readString(dir.resolve("checkpoints/epoch-0001/state.json")));
    assertEquals("epoch-0001", Files.readString(dir.resolve("checkpoints/latest")));
    assertTrue(Files.exists(dir.resolve(RunDirectory.METRICS)));
    assertEquals("mine", Files.readString(dir.resolve("checkpoints/notes.txt")));
    try (var entries = Files.list(dir.resolve("checkpoints"))) {
      assertEquals(
          List.of("epoch-0001", "latest", "notes.txt"),
          entries
              .map(e -> e.getFileName().toString())
              .filter(n -> !n.startsWith("."))
              .sorted()
              .toList());
    }
    try (var entries = Files.list(dir.resolve("checkpoints"))) {
      assertFalse(
          entries.anyMatch(e -> e.getFileName().toString().startsWith(".publishing")),
          "nothing half-published is left");
    }
  }

  /**
   * The published checkpoints are pruned as the staging copy's are (the latest, the best and the
   * newest epoch checkpoint by default; a 12-epoch run left every one of them remotely), earlier
   * runs' included; a folder holding a file ramtrain did not write stays.
   */
  @Test
  void publishedCheckpointsArePrunedAsTheLocalOnesAre() throws Exception {
    Path dir = tmp.resolve("pruned");
    Configuration conf = new Configuration();
    Files.createDirectories(dir.resolve("checkpoints/epoch-0001"));
    Files.writeString(dir.resolve("checkpoints/epoch-0001/state.json"), "{}"); // an earlier run's
    Files.writeString(dir.resolve("checkpoints/latest"), "epoch-0001");
    JobSpec.Output resume =
        new JobSpec.Output("remote://" + dir, RunDirectory.Mode.RESUME, false, 0, 1);
    try (RemoteRun run = RemoteRun.open(resume, conf, "job-a")) {
      Path user = Files.createDirectories(dir.resolve("checkpoints/epoch-0000"));
      Files.writeString(user.resolve("export.onnx"), "mine");
      for (int epoch = 2; epoch <= 5; epoch++) {
        String name = String.format("epoch-%04d", epoch);
        Path saved = Files.createDirectories(run.staging().resolve("checkpoints/" + name));
        Files.writeString(saved.resolve("state.json"), "{}");
        Files.writeString(saved.resolve("model.safetensors"), "weights");
        run.publish(saved);
        if (epoch == 3) {
          run.publishBest(name);
        }
      }
    }
    try (var entries = Files.list(dir.resolve("checkpoints"))) {
      assertEquals(
          List.of("best", "epoch-0000", "epoch-0003", "epoch-0005", "latest"),
          entries
              .map(e -> e.getFileName().toString())
              .filter(n -> !n.startsWith("."))
              .sorted()
              .toList());
    }
    assertEquals("mine", Files.readString(dir.resolve("checkpoints/epoch-0000/export.onnx")));
  }
}
