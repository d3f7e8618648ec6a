package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.jobs.config.ConfigException;
import java.nio.file.Files;
import java.nio.file.Path;
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

  private RunSpec.Output output(Path dir, RunDirectory.Mode mode) {
    return new RunSpec.Output("remote://" + dir, mode, false, 0);
  }

  @Test
  void onlyTheJobThatStartedARunMayStartItAgain() throws Exception {
    Path dir = tmp.resolve("run");
    Configuration conf = new Configuration();
    RunSpec.Output fresh = output(dir, RunDirectory.Mode.FRESH);
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
}
