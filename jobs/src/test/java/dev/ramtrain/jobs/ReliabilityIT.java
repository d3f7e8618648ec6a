package dev.ramtrain.jobs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.ramtrain.etl.TestFiles;
import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.report.DatasetReport;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ramtrain's promises about data, tried for real: bin/ramtrain processes killed with SIGKILL at
 * random instants and at the named points inside the dataset commit, a checkpoint write and a run
 * replacement ({@code ramtrain.pause-at}); writers started together; a disk that fills up. After
 * each, the invariants: no input file touched; a dataset directory is absent, the old version or
 * the new one, whole; a run resumed after any kill ends bit-identical to an uninterrupted one with
 * each step's metrics once; failures exit non-zero with one line naming the cause and the log. The
 * random instants come from a seed printed at the start ({@code -Dramtrain.reliability.seed}
 * repeats a run).
 */
class ReliabilityIT {
  private static final Path ROOT = Path.of(System.getProperty("ramtrain.repo.root"));
  private static final long SEED = Long.getLong("ramtrain.reliability.seed", System.nanoTime());
  private static final Random RANDOM = new Random(SEED);
  private static final String PAUSED = "ramtrain: paused at ";

  @TempDir static Path shared;
  static Path images;
  static Map<String, String> imagesBefore;
  @TempDir Path tmp;

  @BeforeAll
  static void images() throws Exception {
    System.out.println("ReliabilityIT seed " + SEED);
    images = shared.resolve("images");
    Launched g =
        Launched.start(
            shared,
            Map.of(),
            "generate",
            "-o",
            images.toString(),
            "--classes",
            "3",
            "--images-per-class",
            "24",
            "--width",
            "40",
            "--height",
            "40");
    assertEquals(0, g.waitFor(), g.output());
    imagesBefore = TestFiles.contents(images);
  }

  /** A bin/ramtrain process (exec'd into its JVM: a kill reaches Java) and its output. */
  static final class Launched {
    private final Process process;
    private final StringBuffer output = new StringBuffer();
    private final CompletableFuture<String> paused = new CompletableFuture<>();
    private final Thread reader;

    private Launched(Process process) {
      this.process = process;
      this.reader =
          new Thread(
              () -> {
                try (BufferedReader in =
                    new BufferedReader(
                        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                  for (String line; (line = in.readLine()) != null; ) {
                    output.append(line).append('\n');
                    if (line.startsWith(PAUSED)) {
                      paused.complete(line.substring(PAUSED.length()));
                    }
                  }
                } catch (IOException e) {
                  output.append("(output lost: ").append(e).append(")\n");
                }
              });
      reader.start();
    }

    static Launched start(Path logs, Map<String, String> env, String... args) throws IOException {
      List<String> command = new ArrayList<>(List.of(ROOT.resolve("bin/ramtrain").toString()));
      command.addAll(List.of(args));
      ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
      pb.environment().remove("SPARK_HOME");
      pb.environment().put("RAMTRAIN_LOG_DIR", logs.resolve("logs").toString());
      pb.environment().putAll(env);
      return new Launched(pb.start());
    }

    /** Starts {@code args} to stop for good at {@code point} (null: nowhere). */
    static Launched pausing(Path logs, String point, String... args) throws IOException {
      return start(
          logs,
          point == null ? Map.of() : Map.of("RAMTRAIN_JAVA_OPTS", "-Dramtrain.pause-at=" + point),
          args);
    }

    long pid() {
      return process.pid();
    }

    boolean awaitPause(Duration limit) throws Exception {
      try {
        paused.get(limit.toMillis(), TimeUnit.MILLISECONDS);
        return true;
      } catch (java.util.concurrent.TimeoutException e) {
        return false;
      }
    }

    /** SIGKILL: no shutdown hook, no finally block, no close runs. */
    void kill() throws Exception {
      process.destroyForcibly();
      process.waitFor();
      reader.join();
    }

    int waitFor() throws Exception {
      assertTrue(process.waitFor(5, TimeUnit.MINUTES), "finished: " + output);
      reader.join();
      return process.exitValue();
    }

    String output() {
      return output.toString();
    }
  }

  /** The dataset in {@code dir}, checked whole (every shard's checksum and rows); null if none. */
  static Manifest wholeOrAbsent(Path dir) throws IOException {
    if (!Files.exists(dir.resolve("manifest.json"))) {
      return null;
    }
    Dataset d = Dataset.open(dir.toString(), new Configuration());
    DatasetReport.verifyAll(d);
    return d.manifest();
  }

  private String[] preprocess(Path out, int size, boolean overwrite, String... more) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "preprocess",
                "-i",
                images.toString(),
                "-o",
                out.toString(),
                "--height",
                Integer.toString(size),
                "--width",
                Integer.toString(size),
                "--set",
                "ramtrain.etl.val-fraction=0.25"));
    if (overwrite) {
      args.add("--overwrite");
    }
    args.addAll(List.of(more));
    return args.toArray(String[]::new);
  }

  @Test
  void aDatasetKilledAnywhereIsTheOldVersionOrTheNewOneWhole() throws Exception {
    Path ds = tmp.resolve("ds");
    Launched first = Launched.start(tmp, Map.of(), preprocess(ds, 8, false));
    assertEquals(0, first.waitFor(), first.output());
    int current = 8;
    List<String> points =
        List.of(
            "preprocess.commit.staged",
            "preprocess.commit.moved",
            "preprocess.commit.published",
            "",
            "");
    for (String point : points) {
      int next = current == 8 ? 12 : 8; // old and new versions tell apart by their image size
      Launched p =
          Launched.pausing(tmp, point.isEmpty() ? null : point, preprocess(ds, next, true));
      if (point.isEmpty()) {
        Thread.sleep(500 + RANDOM.nextInt(5500));
      } else {
        assertTrue(p.awaitPause(Duration.ofMinutes(2)), point + ": " + p.output());
      }
      p.kill();
      Manifest seen = wholeOrAbsent(ds);
      assertNotNull(seen, "a dataset existed before: it is never lost (" + point + ")");
      int height = seen.image().height();
      assertTrue(height == current || height == next, "old or new, got " + height);
      if (point.equals("preprocess.commit.published")) {
        assertEquals(next, height, "after the manifest's rename the new version is the dataset");
      } else if (point.startsWith("preprocess")) {
        assertEquals(current, height, "before the manifest's rename the old version is");
      }
      current = height;
      assertEquals(imagesBefore, TestFiles.contents(images), "the input is untouched");

      // The next writer finds the lock of a dead process, breaks it, cleans up and commits.
      next = current == 8 ? 12 : 8;
      Launched again = Launched.start(tmp, Map.of(), preprocess(ds, next, true));
      assertEquals(0, again.waitFor(), again.output());
      assertEquals(next, wholeOrAbsent(ds).image().height());
      current = next;
      try (Stream<Path> entries = Files.list(ds)) {
        List<String> names = entries.map(e -> e.getFileName().toString()).sorted().toList();
        assertEquals(2, names.size(), "manifest.json and one version folder: " + names);
        assertTrue(
            names.get(0).equals("manifest.json") && names.get(1).matches("v\\d{4}"),
            names.toString());
      }
    }
  }

  @Test
  void ofWritersStartedTogetherOneCommitsAndTheOtherFailsNamingIt() throws Exception {
    // A writer holding the lock (stopped inside its commit), then another.
    Path ds = tmp.resolve("held");
    Launched holder = Launched.pausing(tmp, "preprocess.commit.staged", preprocess(ds, 8, false));
    assertTrue(holder.awaitPause(Duration.ofMinutes(2)), holder.output());
    Launched second = Launched.start(tmp, Map.of(), preprocess(ds, 8, false));
    assertEquals(1, second.waitFor(), second.output());
    assertTrue(
        second.output().contains("is being written by another ramtrain process")
            && second.output().contains("pid " + holder.pid()),
        second.output());
    holder.kill();
    Launched third = Launched.start(tmp, Map.of(), preprocess(ds, 8, false));
    assertEquals(0, third.waitFor(), third.output());
    assertNotNull(wholeOrAbsent(ds));

    // Started together, unsynchronized: never two commits, never a manifest without its shards.
    for (int trial = 0; trial < 2; trial++) {
      Path out = tmp.resolve("together-" + trial);
      Launched a = Launched.start(tmp, Map.of(), preprocess(out, 8, false));
      Thread.sleep(trial * 700L);
      Launched b = Launched.start(tmp, Map.of(), preprocess(out, 12, false));
      int ra = a.waitFor();
      int rb = b.waitFor();
      List<Integer> codes = new ArrayList<>(List.of(ra, rb));
      codes.sort(null);
      assertEquals(0, (int) codes.get(0), a.output() + b.output());
      assertTrue(codes.get(1) == 1 || codes.get(1) == 2, "the other fails: " + codes);
      Launched loser = ra == 0 ? b : a;
      assertTrue(
          loser.output().contains("is being written by another ramtrain process")
              || loser.output().contains("already holds a dataset"),
          loser.output());
      Manifest m = wholeOrAbsent(out);
      assertEquals(ra == 0 ? 8 : 12, m.image().height(), "the winner's dataset, whole");
    }
  }

  private String[] train(Path dataset, Path run, String... more) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "train",
                "-d",
                dataset.toString(),
                "-o",
                run.toString(),
                "--model",
                "cnn:cb4-p-d0.2-f16-3",
                "--epochs",
                "4",
                "--batch-size",
                "8",
                "--set",
                "ramtrain.train.threads=1",
                "--set",
                "ramtrain.train.log-every=1",
                "--set",
                "ramtrain.train.crop-padding=1",
                "--set",
                "ramtrain.train.flip=true"));
    args.addAll(List.of(more));
    return args.toArray(String[]::new);
  }

  /** (step, loss) of every step record, in file order. */
  private static List<String> stepLosses(Path run) throws IOException {
    Pattern step =
        Pattern.compile(
            "\"step\":(\\d+).*?\"loss\":([-0-9.eE]+)|\"loss\":([-0-9.eE]+).*?\"step\":(\\d+)");
    List<String> out = new ArrayList<>();
    for (String line : Files.readAllLines(run.resolve("metrics.jsonl"))) {
      if (line.contains("\"type\":\"step\"")) {
        Matcher m = step.matcher(line);
        assertTrue(m.find(), line);
        out.add(m.group(1) != null ? m.group(1) + "=" + m.group(2) : m.group(4) + "=" + m.group(3));
      }
    }
    return out;
  }

  /**
   * The ImageNet-style pipeline (issue 28): random resized crops of the 12x12 stored JPEGs to 10x10
   * with flips drawn by the loader, the shards read two at a time (half the train split in memory
   * at once), colour jitter, mixup and cutmix on the device, and checkpoints within epochs, so that
   * kills resume mid-epoch too.
   */
  private String[] trainOnCrops(Path dataset, Path run, String... more) {
    List<String> args =
        new ArrayList<>(
            List.of(
                "--set",
                "ramtrain.train.crop-padding=0",
                "--set",
                "ramtrain.train.shard-window=2",
                "--augment",
                "rrc",
                "--height",
                "10",
                "--width",
                "10",
                "--color-jitter",
                "0.4",
                "--mixup",
                "0.8",
                "--cutmix",
                "1.0",
                "--set",
                "ramtrain.train.checkpoint-every=5"));
    args.addAll(List.of(more));
    return train(dataset, run, args.toArray(String[]::new));
  }

  @Test
  void aRunKilledAnywhereAndResumedEndsBitIdenticalToAnUninterruptedOne() throws Exception {
    Path ds = tmp.resolve("ds");
    assertEquals(
        0, Launched.start(tmp, Map.of(), preprocess(ds, 12, false, "--store", "jpeg")).waitFor());
    Path straight = tmp.resolve("straight");
    long t0 = System.nanoTime();
    Launched s = Launched.start(tmp, Map.of(), trainOnCrops(ds, straight));
    assertEquals(0, s.waitFor(), s.output());
    assertTrue(s.output().contains("data: shards read 2 at a time"), s.output());
    long millis = (System.nanoTime() - t0) / 1_000_000;
    List<String> files = List.of("model.safetensors", "optimizer.safetensors", "state.json");
    List<String> points = List.of("checkpoint.weights-written", "checkpoint.before-latest", "", "");
    for (int trial = 0; trial < points.size(); trial++) {
      Path run = tmp.resolve("run-" + trial);
      String point = points.get(trial);
      Launched first = Launched.pausing(tmp, point.isEmpty() ? null : point, trainOnCrops(ds, run));
      if (point.isEmpty()) {
        Thread.sleep(300 + RANDOM.nextInt((int) Math.max(1000, millis)));
      } else {
        assertTrue(first.awaitPause(Duration.ofMinutes(2)), first.output());
      }
      first.kill();
      // Resume until done, killed once more at a random instant on the way.
      boolean killAgain = true;
      while (true) {
        boolean hasCheckpoint = Files.exists(run.resolve("checkpoints/latest"));
        String mode = hasCheckpoint ? "--resume" : "--overwrite";
        Launched next = Launched.start(tmp, Map.of(), trainOnCrops(ds, run, mode));
        if (killAgain) {
          killAgain = false;
          Thread.sleep(300 + RANDOM.nextInt((int) Math.max(1000, millis)));
          next.kill();
          continue;
        }
        assertEquals(0, next.waitFor(), next.output());
        break;
      }
      for (String f : files) {
        assertArrayEquals(
            Files.readAllBytes(straight.resolve("checkpoints/epoch-0004/" + f)),
            Files.readAllBytes(run.resolve("checkpoints/epoch-0004/" + f)),
            f + " after kills (" + (point.isEmpty() ? "random" : point) + ")");
      }
      assertEquals(stepLosses(straight), stepLosses(run), "each step once, with the same loss");
    }
  }

  @Test
  void anOverwriteKilledBeforeItsFirstCheckpointLeavesTheOldRun() throws Exception {
    Path ds = tmp.resolve("ds");
    assertEquals(0, Launched.start(tmp, Map.of(), preprocess(ds, 12, false)).waitFor());
    Path run = tmp.resolve("run");
    assertEquals(0, Launched.start(tmp, Map.of(), train(ds, run)).waitFor());
    Map<String, String> old = TestFiles.contents(run);
    for (String point : List.of("overwrite.moved-aside", "checkpoint.weights-written")) {
      Launched replacing =
          Launched.pausing(tmp, point, train(ds, run, "--overwrite", "--lr", "0.01"));
      assertTrue(replacing.awaitPause(Duration.ofMinutes(2)), replacing.output());
      replacing.kill();
      // The next run in the directory finds the replacement unfinished and puts the old run back.
      Launched resume = Launched.start(tmp, Map.of(), train(ds, run, "--resume"));
      assertEquals(0, resume.waitFor(), resume.output());
      assertTrue(
          resume.output().contains("after 4 epochs"), "the old run resumed: " + resume.output());
      Map<String, String> now = TestFiles.contents(run);
      for (String f : List.of("checkpoints/epoch-0004/model.safetensors", "checkpoints/latest")) {
        assertEquals(old.get(f), now.get(f), f);
      }
    }
    Launched replacing =
        Launched.pausing(
            tmp, "overwrite.before-discard", train(ds, run, "--overwrite", "--lr", "0.01"));
    assertTrue(replacing.awaitPause(Duration.ofMinutes(2)), replacing.output());
    replacing.kill();
    Launched resume = Launched.start(tmp, Map.of(), train(ds, run, "--resume", "--lr", "0.01"));
    assertEquals(0, resume.waitFor(), resume.output());
    assertTrue(
        resume.output().contains("after 1 epochs"), "the new run resumed: " + resume.output());
    assertFalse(Files.exists(run.resolve("_previous-run")));
  }

  /** A tmpfs of {@code size} at {@code dir}, where this machine lets a test mount one. */
  private static boolean mountTmpfs(Path dir, String size) throws Exception {
    Files.createDirectories(dir);
    Process p =
        new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", dir.toString())
            .redirectErrorStream(true)
            .start();
    p.getInputStream().readAllBytes();
    return p.waitFor() == 0;
  }

  private static void unmount(Path dir) throws Exception {
    new ProcessBuilder("umount", dir.toString()).inheritIO().start().waitFor();
  }

  @Test
  void aFullDiskFailsWithOneLineNamingTheFileAndLeavesNothing() throws Exception {
    Path small = tmp.resolve("small");
    assumeTrue(mountTmpfs(small, "1m"), "mounting a tmpfs is not allowed here");
    try {
      Path out = small.resolve("ds");
      Launched p = Launched.start(tmp, Map.of(), preprocess(out, 128, false));
      assertEquals(1, p.waitFor(), p.output());
      assertOneErrorLine(p.output(), "No space left on device writing ", ".arrow");
      try (Stream<Path> left = Files.list(small)) {
        assertEquals(List.of(), left.toList(), "staging, lock and the folder it made are gone");
      }

      Path ds = tmp.resolve("ds");
      assertEquals(0, Launched.start(tmp, Map.of(), preprocess(ds, 12, false)).waitFor());
      Launched t =
          Launched.start(
              tmp,
              Map.of(),
              "train",
              "-d",
              ds.toString(),
              "-o",
              small.resolve("run").toString(),
              "--model",
              "mlp:432-1024-3",
              "--epochs",
              "1",
              "--batch-size",
              "16",
              "--set",
              "ramtrain.train.threads=1");
      assertEquals(1, t.waitFor(), t.output());
      assertOneErrorLine(
          t.output(), "cannot write the checkpoint of epoch 1: No space left on device writing ");
    } finally {
      unmount(small);
    }
  }

  /** The output has exactly one error line, with {@code parts}, naming a log holding the trace. */
  private static void assertOneErrorLine(String output, String... parts) throws IOException {
    List<String> errors = output.lines().filter(l -> l.contains(": error: ")).toList();
    assertEquals(1, errors.size(), output);
    String line = errors.get(0);
    for (String part : parts) {
      assertTrue(line.contains(part), line);
    }
    assertFalse(output.contains("\tat "), "no stack trace on the console: " + output);
    assertTrue(output.lines().count() < 15, "no flood: " + output);
    Matcher log = Pattern.compile("\\(full log: (.*)\\)$").matcher(line);
    assertTrue(log.find(), line);
    assertTrue(
        Files.readString(Path.of(log.group(1))).contains("\tat "), "the trace is in the log");
  }
}
