package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Ctrl-C under a run: one line on where it stopped and how it continues; the lock released. */
class InterruptedRunNoticeTest {
  @TempDir Path run;

  private String interrupt(AtomicInteger closes) {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    new InterruptedRunNotice(run, closes::incrementAndGet, new PrintStream(err, true)).run();
    return err.toString(StandardCharsets.UTF_8);
  }

  @Test
  void namesTheLastCheckpointAndResume() throws Exception {
    Files.createDirectories(run.resolve("checkpoints"));
    Files.writeString(run.resolve("checkpoints/latest"), "epoch-0003\n");
    AtomicInteger closes = new AtomicInteger();
    String said = interrupt(closes);
    assertEquals(
        "ramtrain train: interrupted; the last checkpoint of "
            + run
            + " is checkpoints/epoch-0003: the same command with --resume continues from it",
        said.strip());
    assertEquals(1, closes.get(), "the lock is released");
  }

  @Test
  void saysSoWhenThereIsNothingToResume() {
    AtomicInteger closes = new AtomicInteger();
    String said = interrupt(closes);
    assertTrue(said.contains("interrupted before the first checkpoint"), said);
    assertTrue(said.contains("nothing to resume"), said);
    assertEquals(1, said.strip().lines().count(), said);
    assertEquals(1, closes.get());
  }
}
