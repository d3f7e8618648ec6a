package dev.ramtrain.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.TestFiles;
import dev.ramtrain.jobs.Main;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Bad settings, bad inputs and unsafe outputs as a person meets them on the command line: the exit
 * status (2 usage, 1 failed run), one line naming the key or file and the cause, and nothing lost
 * or half-written.
 */
class CommandFailuresTest {
  @TempDir static Path shared;
  @TempDir Path tmp;
  static Path images;
  static Path dataset;

  @BeforeAll
  static void dataset() {
    images = shared.resolve("images");
    MainTest.Run g =
        MainTest.run(
            "generate",
            "-o",
            images.toString(),
            "--classes",
            "3",
            "--images-per-class",
            "10",
            "--width",
            "32",
            "--height",
            "32");
    assertEquals(0, g.status(), g.err());
    dataset = shared.resolve("dataset");
    MainTest.Run p =
        MainTest.run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            dataset.toString(),
            "--height",
            "8",
            "--width",
            "8",
            "--set",
            "ramtrain.etl.val-fraction=0.3");
    assertEquals(0, p.status(), p.err());
  }

  private static final List<String> FLAGS = List.of("--resume", "--resume-anyway", "--overwrite");

  /** {@code train} with small defaults; {@code more} adds flags and replaces options' values. */
  private static MainTest.Run train(Path run, String... more) {
    Map<String, String> options = new LinkedHashMap<>();
    options.put("-d", dataset.toString());
    options.put("-o", run.toString());
    options.put("--model", "mlp:192-16-3");
    options.put("--epochs", "2");
    options.put("--batch-size", "4");
    List<String> flags = new ArrayList<>();
    for (int i = 0; i < more.length; i++) {
      if (FLAGS.contains(more[i])) {
        flags.add(more[i]);
      } else {
        options.put(more[i], more[++i]);
      }
    }
    List<String> args = new ArrayList<>(List.of("train"));
    options.forEach((k, v) -> args.addAll(List.of(k, v)));
    args.addAll(flags);
    args.addAll(
        List.of("--set", "ramtrain.train.threads=1", "--set", "ramtrain.train.log-every=1"));
    return MainTest.run(args.toArray(String[]::new));
  }

  private static void assertOneLine(MainTest.Run r, int status, String... parts) {
    assertEquals(status, r.status(), r.err());
    assertEquals(1, r.err().strip().lines().count(), "one line: " + r.err());
    for (String part : parts) {
      assertTrue(r.err().contains(part), "'" + r.err() + "' should contain '" + part + "'");
    }
  }

  private static byte[] bytes(Path p) throws Exception {
    return Files.readAllBytes(p);
  }

  @Test
  void aRunDirectoryIsReplacedOnlyWhenAskedAndOnlyOnceTheNewRunHasACheckpoint() throws Exception {
    Path run = tmp.resolve("run");
    assertEquals(0, train(run).status());
    byte[] weights = bytes(run.resolve("checkpoints/epoch-0002/model.safetensors"));
    assertOneLine(
        train(run), Main.EXIT_USAGE, "ramtrain.train.output", "already holds a training run");
    assertArrayEquals(weights, bytes(run.resolve("checkpoints/epoch-0002/model.safetensors")));

    // An overwrite whose settings fail after the directory is opened: the old run stays whole.
    MainTest.Run failed = train(run, "--overwrite", "--offload", "on", "--device-budget", "1KiB");
    assertEquals(Main.EXIT_USAGE, failed.status(), failed.err());
    assertArrayEquals(weights, bytes(run.resolve("checkpoints/epoch-0002/model.safetensors")));

    MainTest.Run replaced = train(run, "--overwrite", "--epochs", "1", "--lr", "0.01");
    assertEquals(0, replaced.status(), replaced.err());
    assertFalse(Files.exists(run.resolve("checkpoints/epoch-0002")), "the old run is gone");
    assertEquals("epoch-0001", Files.readString(run.resolve("checkpoints/latest")).strip());
    assertFalse(Files.exists(run.resolve("_previous-run")));
  }

  /**
   * A run that diverges before its first checkpoint leaves nothing half-written: the directory it
   * created goes (the log keeps its steps); a directory it did not create keeps the metrics, which
   * are no run to protect: the same command with a sane learning rate takes it, and --resume says
   * there is nothing to resume (it once said "--resume continues it", and --resume "leave out
   * --resume").
   */
  @Test
  void aRunThatFailedBeforeItsFirstCheckpointDoesNotBlockTheNext() throws Exception {
    Path created = tmp.resolve("created");
    MainTest.Run first = train(created, "--lr", "1e9");
    assertEquals(Main.EXIT_FAILURE, first.status(), first.err());
    assertFalse(Files.exists(created), "the directory the stopped run created is gone");
    Path run = Files.createDirectory(tmp.resolve("run"));
    MainTest.Run diverged = train(run, "--lr", "1e9");
    assertEquals(Main.EXIT_FAILURE, diverged.status(), diverged.err());
    assertTrue(Files.exists(run.resolve("metrics.jsonl")), "the user's directory keeps them");
    assertOneLine(train(run, "--resume"), Main.EXIT_USAGE, "no checkpoint to resume from");
    MainTest.Run again = train(run, "--lr", "0.01");
    assertEquals(0, again.status(), again.err());
  }

  @Test
  void aModelThatDoesNotFitTheDataIsAUsageErrorBeforeAnythingIsAllocated() {
    assertOneLine(
        train(tmp.resolve("a"), "--model", "mlp:192-5"),
        Main.EXIT_USAGE,
        "ramtrain.train.model = 'mlp:192-5' has 5 outputs; the dataset has 3 classes");
    for (String spec : List.of("mlp:", "cnn:zz", "resnet:7-10", "transformer:12")) {
      assertOneLine(
          train(tmp.resolve("b"), "--model", spec),
          Main.EXIT_USAGE,
          "ramtrain.train.model = '" + spec + "'");
    }
    assertOneLine(
        train(tmp.resolve("c"), "--drop-path", "0.1"),
        Main.EXIT_USAGE,
        "ramtrain.train.model = 'mlp:192-16-3': has no stochastic depth, and"
            + " ramtrain.train.drop-path = 0.1 asks for it");
    assertFalse(
        Files.exists(tmp.resolve("a"))
            || Files.exists(tmp.resolve("b"))
            || Files.exists(tmp.resolve("c")));
    assertOneLine(
        MainTest.run("plan", "--model", "cnn:zz"),
        Main.EXIT_USAGE,
        "ramtrain.train.model = 'cnn:zz'");
  }

  /**
   * The cpu backend's memory is one number, planned with and enforced: a batch whose resident
   * training exceeds it is a usage error naming --batch-size and both sizes, never an offload onto
   * the same host memory or an allocator's trace.
   */
  @Test
  void aBatchBeyondTheCpuBackendsMemoryIsAUsageErrorNamingTheBatchSize() {
    // 512 MiB of margin and 30 MiB of budget: 3.3 M parameters' 16 bytes each of weights,
    // gradients and moments do not fit, one layer's streaming slots would
    MainTest.Run r =
        train(
            tmp.resolve("a"),
            "--model",
            "mlp:192-1024-1024-1024-1024-3",
            "--set",
            "ramtrain.cpu.memory=542MiB");
    assertOneLine(
        r,
        Main.EXIT_USAGE,
        "ramtrain.train.batch-size = 4: training resident at this batch needs 5",
        "and it has 30.0 MiB (ramtrain.cpu.memory",
        "use a smaller --batch-size");
    assertFalse(Files.exists(tmp.resolve("a")));
    assertOneLine(
        train(tmp.resolve("b"), "--set", "ramtrain.cpu.memory=-1"),
        Main.EXIT_USAGE,
        "ramtrain.cpu.memory");
  }

  /**
   * A resident model keeps its parameters in one allocation, which the cpu backend limits to 2 GiB
   * (its kernels view buffers whole): 543 M parameters (2.02 GiB) resident are refused naming
   * ramtrain.offload.mode before anything is allocated, where the allocator's refusal had told the
   * user to shrink the batch.
   */
  @Test
  void aResidentModelOverTheCpuBackendsLargestAllocationNamesTheOffloadMode() {
    MainTest.Run r =
        train(tmp.resolve("a"), "--model", "mlp:192-23200-23200-3", "--offload", "off");
    assertOneLine(
        r,
        Main.EXIT_USAGE,
        "ramtrain.offload.mode = off: a resident model keeps its parameters in one allocation",
        "2.02 GiB for mlp:192-23200-23200-3's 542,810,403",
        "the cpu backend's largest is 2.00 GiB",
        "use ramtrain.offload.mode = on");
    assertFalse(Files.exists(tmp.resolve("a")));
  }

  @Test
  void flagsOutsideTheirRangeAreUsageErrors() throws Exception {
    Path run = tmp.resolve("run");
    assertEquals(0, train(run).status());
    assertOneLine(
        MainTest.run("predict", "-c", run.toString(), "--batch-size", "0", images.toString()),
        Main.EXIT_USAGE,
        "--batch-size must be >= 1");
    assertOneLine(
        MainTest.run(
            "evaluate",
            "-c",
            run.toString(),
            "-d",
            dataset.toString(),
            "--split",
            "test",
            "--confusion",
            tmp.resolve("c.png").toString()),
        Main.EXIT_USAGE,
        "--split test",
        "[train, val]");
    assertOneLine(
        MainTest.run("evaluate", "-c", run.toString(), "--batch-size", "0"),
        Main.EXIT_USAGE,
        "evaluate --batch-size must be >= 1, got 0");
    assertOneLine(
        MainTest.run("evaluate", "-c", tmp.resolve("nowhere").toString(), "-d", dataset.toString()),
        Main.EXIT_FAILURE,
        "nowhere: no such checkpoint folder or run directory");
    assertOneLine(
        train(run, "--resume-anyway"), Main.EXIT_USAGE, "--resume-anyway goes with --resume");
    assertOneLine(train(run, "--resume", "--overwrite"), Main.EXIT_USAGE, "give one");
    // Settings are checked once, by the records they become: a usage error naming the key.
    assertOneLine(
        train(tmp.resolve("beta"), "--set", "ramtrain.train.beta1=1.5"),
        Main.EXIT_USAGE,
        "ramtrain.train.optimizer",
        "0 <= beta < 1");
    assertOneLine(
        train(tmp.resolve("fp16"), "--set", "ramtrain.train.precision=fp16"),
        Main.EXIT_USAGE,
        "ramtrain.train.precision = 'fp16' is not allowed");
    assertOneLine(
        train(tmp.resolve("cuda"), "--set", "ramtrain.train.backend=cuda"),
        Main.EXIT_USAGE,
        "backend cuda: no CUDA driver could be loaded");
    // Load-time and device augmentation (issue 28): each bad value names its key.
    assertOneLine(
        train(tmp.resolve("rrc"), "--augment", "crop"),
        Main.EXIT_USAGE,
        "ramtrain.train.augment.mode");
    assertOneLine(
        train(
            tmp.resolve("scale"), "--augment", "rrc", "--set", "ramtrain.train.augment.scale=0.5"),
        Main.EXIT_USAGE,
        "ramtrain.train.augment.scale",
        "[min, max]");
    assertOneLine(
        train(
            tmp.resolve("ratio"), "--augment", "rrc", "--set", "ramtrain.train.augment.ratio=2,1"),
        Main.EXIT_USAGE,
        "ramtrain.train.augment.ratio",
        "needs 0 < min <= max");
    assertOneLine(
        train(tmp.resolve("height"), "--augment", "rrc", "--height", "-3"),
        Main.EXIT_USAGE,
        "ramtrain.train.augment.height",
        ">= 0");
    assertOneLine(
        train(tmp.resolve("pad"), "--augment", "rrc", "--set", "ramtrain.train.crop-padding=2"),
        Main.EXIT_USAGE,
        "ramtrain.train.crop-padding",
        "exclude each other");
    assertOneLine(
        train(tmp.resolve("mixup"), "--mixup", "-1"), Main.EXIT_USAGE, "ramtrain.train.mixup");
    assertOneLine(
        train(tmp.resolve("jitter"), "--color-jitter", "-0.5"),
        Main.EXIT_USAGE,
        "ramtrain.train.color-jitter");
    // JPEG rows and windows of shards (issue 28): each bad value names its key.
    assertOneLine(
        train(tmp.resolve("bad"), "--set", "ramtrain.train.bad-sample=ignore"),
        Main.EXIT_USAGE,
        "ramtrain.train.bad-sample");
    assertOneLine(
        train(tmp.resolve("window"), "--set", "ramtrain.train.shard-window=-1"),
        Main.EXIT_USAGE,
        "ramtrain.train.shard-window",
        ">= 0");
    for (String[] bad :
        new String[][] {
          {"--store", "png"}, {"--store", "jpeg", "--jpeg-quality", "101"},
        }) {
      List<String> args =
          new java.util.ArrayList<>(
              List.of(
                  "preprocess",
                  "-i",
                  images.toString(),
                  "-o",
                  tmp.resolve("store-" + bad.length).toString()));
      args.addAll(List.of(bad));
      assertOneLine(
          MainTest.run(args.toArray(String[]::new)),
          Main.EXIT_USAGE,
          bad.length == 2 ? "ramtrain.etl.store" : "ramtrain.etl.jpeg-quality");
    }
  }

  @Test
  void aResumeWithOtherSettingsOrDataIsRefusedNamingWhatChanged() throws Exception {
    Path run = tmp.resolve("run");
    assertEquals(0, train(run).status());
    byte[] metrics = bytes(run.resolve("metrics.jsonl"));
    assertOneLine(
        train(run, "--resume", "--epochs", "3", "--lr", "0.01"),
        Main.EXIT_USAGE,
        "ramtrain.train.lr 0.001 -> 0.01",
        "--resume-anyway");
    assertArrayEquals(
        metrics, bytes(run.resolve("metrics.jsonl")), "a refused resume changes nothing");
    assertOneLine( // TF32 rounds fp32 operands on a GPU: another setting computes other numbers
        train(run, "--resume", "--epochs", "3", "--set", "ramtrain.cuda.tf32=all"),
        Main.EXIT_USAGE,
        "ramtrain.cuda.tf32 convolutions -> all");
    Path other = tmp.resolve("other");
    assertEquals(
        0,
        MainTest.run(
                "preprocess",
                "-i",
                images.toString(),
                "-o",
                other.toString(),
                "--height",
                "8",
                "--width",
                "8",
                "--seed",
                "5",
                "--set",
                "ramtrain.etl.val-fraction=0.3")
            .status());
    MainTest.Run otherData =
        MainTest.run(
            "train",
            "-d",
            other.toString(),
            "-o",
            run.toString(),
            "--model",
            "mlp:192-16-3",
            "--epochs",
            "3",
            "--batch-size",
            "4",
            "--resume",
            "--set",
            "ramtrain.train.threads=1",
            "--set",
            "ramtrain.train.log-every=1");
    assertOneLine(otherData, Main.EXIT_USAGE, "the data (dataset " + dataset);
    MainTest.Run anyway =
        train(run, "--resume", "--epochs", "3", "--lr", "0.01", "--resume-anyway");
    assertEquals(0, anyway.status(), anyway.err());
    assertTrue(
        anyway.out().contains("resuming anyway with changes: ramtrain.train.lr"), anyway.out());
    // An extended run (constant learning rate) is the same run: no flag needed.
    assertEquals(0, train(run, "--resume", "--epochs", "4", "--lr", "0.01").status());
    // A resume starts from the run's recorded settings: the model, batch and learning rate it
    // trained with need not be repeated; a flag given is a change, checked as one.
    MainTest.Run bare =
        MainTest.run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            run.toString(),
            "--resume",
            "--epochs",
            "5",
            "--set",
            "ramtrain.train.threads=1");
    assertEquals(0, bare.status(), bare.err());
    assertTrue(bare.out().contains("mlp:192-16-3"), bare.out());
    assertOneLine(
        MainTest.run(
            "train", "-d", dataset.toString(), "-o", run.toString(), "--resume", "--lr", "0.1"),
        Main.EXIT_USAGE,
        "ramtrain.train.lr 0.01 -> 0.1");
    // A checkpoint older than a setting resumes under the value its run computed with, although
    // the setting's default has changed since (ema-warmup: false before it existed, true now).
    String latest = Files.readString(run.resolve("checkpoints/latest")).strip();
    Path state = run.resolve("checkpoints").resolve(latest).resolve("state.json");
    Files.writeString(
        state, Files.readString(state).replace("\"ramtrain.train.ema-warmup\" : \"true\",", ""));
    assertFalse(Files.readString(state).contains("ema-warmup"), "the older checkpoint's record");
    MainTest.Run older =
        MainTest.run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            run.toString(),
            "--resume",
            "--epochs",
            "6",
            "--set",
            "ramtrain.train.threads=1");
    assertEquals(0, older.status(), older.err());
  }

  @Test
  void manifestsAreCheckedBeforeTheirFilesAreOpened() throws Exception {
    Path copy = tmp.resolve("copy");
    TestFiles.copyTree(dataset, copy);
    Path manifest = copy.resolve("manifest.json");
    String json = Files.readString(manifest);
    Files.writeString(
        manifest,
        json.replaceFirst("v0001/train/part-00000.arrow", "../../../../../../etc/passwd"));
    for (MainTest.Run r :
        List.of(
            MainTest.run("inspect", copy.toString(), "--verify-all", "--samples", "0"),
            train(tmp.resolve("run"), "-d", copy.toString()))) {
      assertOneLine(r, Main.EXIT_FAILURE, manifest.toString(), "not a plain relative path");
    }

    Files.writeString(manifest, json.replaceFirst("\"rows\" : (\\d+)", "\"rows\" : 1$1"));
    assertOneLine(
        train(tmp.resolve("run"), "-d", copy.toString()),
        Main.EXIT_FAILURE,
        "manifest is inconsistent");

    Files.writeString(manifest, "{\"format\": \"ramtrain-dataset\", \"formatVersion\": 1,,}");
    assertOneLine(
        MainTest.run("inspect", copy.toString()), Main.EXIT_FAILURE, "not valid JSON", "line 1");
    assertFalse(Files.exists(tmp.resolve("run")));
  }

  @Test
  void generateNeverWritesOverFilesOfYours() throws Exception {
    Path mine = tmp.resolve("mine");
    Files.createDirectories(mine.resolve("circle"));
    Files.writeString(mine.resolve("circle/img_00000.png"), "my own picture");
    assertOneLine(
        MainTest.run("generate", "-o", mine.toString(), "--classes", "2"),
        Main.EXIT_USAGE,
        "ramtrain.generate.output",
        "is not empty");
    assertEquals("my own picture", Files.readString(mine.resolve("circle/img_00000.png")));

    // The demo clears a half-generated image folder of its own, never one with other files.
    Path work = tmp.resolve("work");
    Files.createDirectories(work.resolve("images.partial/circle"));
    Files.writeString(work.resolve("images.partial/circle/img_00003.png"), "half written");
    Files.writeString(work.resolve("images.partial/circle/notes.txt"), "mine");
    assertOneLine(
        MainTest.run("demo", "--workdir", work.toString()),
        Main.EXIT_USAGE,
        "notes.txt was not written by the demo");
    assertEquals("mine", Files.readString(work.resolve("images.partial/circle/notes.txt")));
    assertTrue(Files.exists(work.resolve("images.partial/circle/img_00003.png")));
  }

  @Test
  void unwritableOutputsGiveOneLineWithTheCause() {
    assertOneLine(
        MainTest.run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            "/proc/ramtrain-out",
            "--height",
            "8",
            "--width",
            "8"),
        Main.EXIT_FAILURE,
        "cannot create the output directory /proc/ramtrain-out: ");
    MainTest.Run sheet =
        MainTest.run("inspect", dataset.toString(), "--sheet", "/proc/ramtrain/sheet.png");
    assertOneLine(sheet, Main.EXIT_FAILURE, "cannot write the PNG /proc/ramtrain/sheet.png");
    assertFalse(sheet.err().contains("ImageOutputStream"), sheet.err());
  }

  /** An image of the generated set, any one. */
  private static Path anImage() throws Exception {
    try (var walk = Files.walk(images)) {
      return walk.filter(p -> p.toString().endsWith(".png")).findFirst().orElseThrow();
    }
  }

  /**
   * predict reads regular files only, each within ramtrain.etl.max-file-bytes: a named pipe, a
   * device, a 2 GiB file and a missing path become error rows beside the good image's prediction
   * (none hangs, none runs out of memory), and a file name's escape sequence and spreadsheet
   * formula reach the CSV harmless.
   */
  @Test
  @Timeout(120)
  void predictListsWhatItCannotReadAndReadsOnlyFiles() throws Exception {
    Path run = tmp.resolve("run");
    assertEquals(0, train(run, "--epochs", "1").status());
    Path in = Files.createDirectories(tmp.resolve("in"));
    Path good = Files.copy(anImage(), in.resolve("good.png"));
    Path hostile = Files.copy(anImage(), in.resolve("=HYPERLINK(1)\u001b[2J.png"));
    Path fifo = in.resolve("pipe.jpg");
    assertEquals(0, new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor());
    Path big = in.resolve("big.jpg");
    try (var f = new java.io.RandomAccessFile(big.toFile(), "rw")) {
      f.setLength(2L << 30); // sparse: no disk, but 2 GiB to read
    }
    Path csv = tmp.resolve("out.csv");
    MainTest.Run p =
        MainTest.run(
            "predict",
            "-c",
            run.toString(),
            "-o",
            csv.toString(),
            good.toString(),
            hostile.toString(),
            fifo.toString(),
            big.toString(),
            "/dev/zero",
            tmp.resolve("missing.jpg").toString());
    assertOneLine(p, Main.EXIT_FAILURE, "4 of 6 images could not be read");
    List<String> rows = Files.readAllLines(csv);
    assertEquals(7, rows.size(), String.join("\n", rows));
    assertTrue(rows.get(1).startsWith(good + ",") && rows.get(1).endsWith(","), rows.get(1));
    assertTrue(rows.get(2).startsWith(in + "/=HYPERLINK(1)\\x1b[2J.png,"), rows.get(2));
    assertTrue(rows.get(3).contains("not a regular file"), rows.get(3));
    assertTrue(rows.get(4).contains("exceeds ramtrain.etl.max-file-bytes"), rows.get(4));
    assertTrue(rows.get(5).contains("not a regular file"), rows.get(5));
    assertTrue(rows.get(6).contains("unreadable"), rows.get(6));
    for (String row : rows) {
      assertFalse(row.chars().anyMatch(c -> c < 0x20), "no control character: " + row);
    }
  }

  /** CSV fields a spreadsheet would run as formulas are text; control characters are visible. */
  @Test
  void csvFieldsAreNeitherFormulasNorTerminalCommands() {
    assertEquals(
        "\"'=HYPERLINK(\"\"http://x\"\")\"", PredictCommand.field("=HYPERLINK(\"http://x\")"));
    assertEquals("'+1", PredictCommand.field("+1"));
    assertEquals("'-2+3", PredictCommand.field("-2+3"));
    assertEquals("'@SUM(A1)", PredictCommand.field("@SUM(A1)"));
    assertEquals("\"a,b\"", PredictCommand.field("a,b"));
    assertEquals("cat\\x1b[31m", PredictCommand.field("cat\u001b[31m"));
    assertEquals("0.500000", PredictCommand.field("0.500000"));
  }

  /**
   * An output a user names replaces nothing ramtrain did not write: not one of the command's
   * inputs, not a dataset's manifest, not a file of the user's; its own output, again, it does.
   */
  @Test
  void explicitOutputsNeverReplaceAnInputOrAFileOfYours() throws Exception {
    Path run = tmp.resolve("run");
    assertEquals(0, train(run, "--epochs", "1").status());
    Path image = Files.copy(anImage(), tmp.resolve("cat.png"));
    byte[] pixels = bytes(image);
    assertOneLine(
        MainTest.run("predict", "-c", run.toString(), "-o", image.toString(), image.toString()),
        Main.EXIT_USAGE,
        "predict -o " + image + " is one of its inputs");
    assertArrayEquals(pixels, bytes(image));
    Path notes = Files.writeString(tmp.resolve("notes.csv"), "my,own,table\n");
    assertOneLine(
        MainTest.run("predict", "-c", run.toString(), "-o", notes.toString(), image.toString()),
        Main.EXIT_USAGE,
        "exists and ramtrain did not write it");
    assertEquals("my,own,table\n", Files.readString(notes));
    Path csv = tmp.resolve("predictions.csv");
    for (int i = 0; i < 2; i++) { // its own CSV it replaces
      MainTest.Run p =
          MainTest.run("predict", "-c", run.toString(), "-o", csv.toString(), image.toString());
      assertEquals(0, p.status(), p.err());
    }

    Path manifest = dataset.resolve("manifest.json");
    byte[] before = bytes(manifest);
    assertOneLine(
        MainTest.run(
            "evaluate", "-c", run.toString(), "-d", dataset.toString(), "-o", manifest.toString()),
        Main.EXIT_USAGE,
        "evaluate -o " + manifest + " exists and ramtrain did not write it");
    assertArrayEquals(before, bytes(manifest));
    Path png = tmp.resolve("matrix.png");
    for (int i = 0; i < 2; i++) {
      MainTest.Run e =
          MainTest.run(
              "evaluate", "-c", run.toString(), "-d", dataset.toString(), "-o", png.toString());
      assertEquals(0, e.status(), e.err());
    }

    // A run's report folder: a file of a report's name the run did not write stays.
    Path loss = run.resolve("report/loss.png");
    Files.delete(loss);
    dev.ramtrain.jobs.train.RunJournal.of(run).forget(java.util.Set.of("report/loss.png"));
    Files.writeString(loss, "my picture");
    assertOneLine(
        MainTest.run("report", run.toString()),
        Main.EXIT_FAILURE,
        loss + ": ramtrain did not write it");
    assertEquals("my picture", Files.readString(loss));
  }

  /** inspect's sheet goes beside the dataset, or to a folder of its own: never the working one. */
  @Test
  void inspectDrawsItsSheetBesideTheDatasetNeverInTheWorkingDirectory() throws Exception {
    Path copy = tmp.resolve("ds");
    TestFiles.copyTree(dataset, copy);
    MainTest.Run r = MainTest.run("inspect", copy.toString());
    assertEquals(0, r.status(), r.err());
    assertTrue(r.out().contains("contact sheet " + tmp.resolve("ds-samples.png")), r.out());
    assertFalse(Files.exists(Path.of("ds-samples.png").toAbsolutePath()));
    Files.writeString(tmp.resolve("ds-samples.png"), "a file of mine");
    MainTest.Run again = MainTest.run("inspect", copy.toString());
    assertEquals(0, again.status(), again.err());
    assertTrue(again.out().contains("ramtrain-inspect-"), "a folder of its own: " + again.out());
    assertEquals("a file of mine", Files.readString(tmp.resolve("ds-samples.png")));
  }

  /**
   * A sheet asked into the image folder the dataset was made from is refused (the next preprocess
   * would read it as an image), and --help says where the sheet goes by default.
   */
  @Test
  void inspectKeepsItsSheetOutOfTheSourceImages() throws Exception {
    Path inside = images.resolve("circle/sheet.png");
    assertOneLine(
        MainTest.run("inspect", dataset.toString(), "--sheet", inside.toString()),
        Main.EXIT_USAGE,
        "the images this dataset was preprocessed from");
    assertFalse(Files.exists(inside), "nothing written");
    String help = MainTest.run("inspect", "--help").out().replaceAll("\\s+", " ");
    assertTrue(help.contains("DATASET-samples.png beside the dataset"), help);
    assertFalse(help.contains("Default: none"), help);
  }

  /** A --set key outside ramtrain's settings was ignored without a word: a usage error now. */
  @Test
  void aSetOfAnotherLibrarysKeyIsRefused() {
    assertOneLine(
        MainTest.run("inspect", dataset.toString(), "--set", "foo.bar=1"),
        Main.EXIT_USAGE,
        "--set foo.bar=1: not a ramtrain setting");
  }

  /**
   * Run files a user deleted: a resume of a run that averaged its weights without its
   * model_ema.safetensors is refused (it restarted the average silently), and a checkpoint without
   * its model.safetensors is named as not whole (it printed the bare path).
   */
  @Test
  void aCheckpointMissingItsFilesIsRefusedNamingWhat() throws Exception {
    Path run = tmp.resolve("ema-run");
    MainTest.Run first = train(run, "--epochs", "1", "--ema", "0.9");
    assertEquals(0, first.status(), first.err());
    Path checkpoint = run.resolve("checkpoints/epoch-0001");
    Files.delete(checkpoint.resolve("model_ema.safetensors"));
    assertOneLine(
        train(run, "--epochs", "2", "--ema", "0.9", "--resume"),
        Main.EXIT_FAILURE,
        checkpoint.resolve("model_ema.safetensors") + " is missing",
        "averaged its weights");
    Files.delete(checkpoint.resolve("model.safetensors"));
    assertOneLine(
        MainTest.run("evaluate", "-c", run.toString(), "-d", dataset.toString()),
        Main.EXIT_FAILURE,
        checkpoint.resolve("model.safetensors") + " is missing",
        "is not a whole checkpoint");
  }

  /** A named pipe among the images is a listed reject; the job does not wait on it. */
  @Test
  @Timeout(120)
  void preprocessRejectsWhatIsNotAFile() throws Exception {
    Path in = tmp.resolve("in");
    TestFiles.copyTree(images, in);
    Path fifo = in.resolve("circle/pipe.jpg");
    assertEquals(0, new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor());
    Path out = tmp.resolve("out");
    MainTest.Run p =
        MainTest.run(
            "preprocess",
            "-i",
            in.toString(),
            "-o",
            out.toString(),
            "--height",
            "8",
            "--width",
            "8",
            "--set",
            "ramtrain.etl.max-reject-fraction=0.1");
    assertEquals(0, p.status(), p.err());
    String rejects = Files.readString(out.resolve("v0001/rejects.jsonl"));
    assertTrue(rejects.contains("pipe.jpg") && rejects.contains("not a regular file"), rejects);
  }

  /**
   * Class names (folder names) and paths reach the console as visible escapes: an escape sequence
   * in a folder's name cannot recolour, clear or retitle the user's terminal.
   */
  @Test
  void namesFromFilesReachTheConsoleHarmless() throws Exception {
    Path in = tmp.resolve("in");
    TestFiles.copyTree(images, in);
    Path circle;
    try (var dirs = Files.list(in)) {
      circle = dirs.sorted().findFirst().orElseThrow();
    }
    Files.move(circle, in.resolve("red\u001b[31m\u001b]0;owned\u0007"));
    Path out = tmp.resolve("out");
    MainTest.Run p =
        MainTest.run(
            "preprocess",
            "-i",
            in.toString(),
            "-o",
            out.toString(),
            "--height",
            "8",
            "--width",
            "8",
            "--set",
            "ramtrain.etl.val-fraction=0.3");
    assertEquals(0, p.status(), p.err());
    MainTest.Run inspect = MainTest.run("inspect", out.toString(), "--samples", "0");
    assertEquals(0, inspect.status(), inspect.err());
    assertTrue(inspect.out().contains("red\\x1b[31m\\x1b]0;owned\\x07"), inspect.out());
    MainTest.Run missing = MainTest.run("inspect", tmp.resolve("gone\u001b[2J").toString());
    assertOneLine(missing, Main.EXIT_USAGE, "gone\\x1b[2J");
    for (MainTest.Run r : List.of(p, inspect, missing)) {
      assertFalse((r.out() + r.err()).contains("\u001b"), "no raw escape: " + r.out() + r.err());
    }
  }
}
