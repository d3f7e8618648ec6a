package dev.ramtrain.jobs.cli;

import static dev.ramtrain.jobs.RunMetrics.epochs;
import static dev.ramtrain.jobs.RunMetrics.figure;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.jobs.Main;
import dev.ramtrain.jobs.RunMetrics;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MainTest {
  @TempDir Path tmp;

  /** Runs the CLI, capturing what it prints. */
  record Run(int status, String out, String err) {}

  static Run run(String... args) {
    PrintStream out = System.out;
    PrintStream err = System.err;
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    ByteArrayOutputStream e = new ByteArrayOutputStream();
    try {
      System.setOut(new PrintStream(o, true, StandardCharsets.UTF_8));
      System.setErr(new PrintStream(e, true, StandardCharsets.UTF_8));
      int status = Main.run(args);
      return new Run(
          status, o.toString(StandardCharsets.UTF_8), e.toString(StandardCharsets.UTF_8));
    } finally {
      System.setOut(out);
      System.setErr(err);
    }
  }

  @Test
  void generatePreprocessInspect() throws Exception {
    Path images = tmp.resolve("images");
    Run g =
        run(
            "generate",
            "-o",
            images.toString(),
            "--classes",
            "3",
            "--images-per-class",
            "8",
            "--width",
            "40",
            "--height",
            "40");
    assertEquals(0, g.status(), g.err());
    assertTrue(g.out().contains("wrote 24 images"), g.out());

    Path dataset = tmp.resolve("dataset");
    Run p =
        run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            dataset.toString(),
            "--height",
            "16",
            "--width",
            "16",
            "--copies",
            "1",
            "--set",
            "ramtrain.etl.val-fraction=0.25");
    assertEquals(0, p.status(), p.err());
    assertTrue(p.out().contains("3 classes"), p.out());
    assertTrue(Files.exists(dataset.resolve("manifest.json")));

    Path sheet = tmp.resolve("sheet.png");
    Run i =
        run(
            "inspect",
            dataset.toString(),
            "--samples",
            "9",
            "--sheet",
            sheet.toString(),
            "--verify-all");
    assertEquals(0, i.status(), i.err());
    assertTrue(i.out().contains("16x16x3 uint8 HWC"), i.out());
    // What preprocessing did: the fraction of the folder's inputs taken for val, one copy made.
    assertTrue(i.out().contains("val split    25% of the inputs"), i.out());
    assertTrue(
        i.out().contains("augmentation 1 augmented copy per image and the original"), i.out());
    assertFalse(i.out().contains("transforms"), i.out());
    assertTrue(i.out().contains("48 rows, every shard's CRC32C matches"), i.out());
    assertTrue(i.out().contains("circle"), i.out());
    var png = ImageIO.read(sheet.toFile());
    assertTrue(png.getWidth() > 3 * 16 && png.getHeight() > 3 * 16, "a 3x3 grid of upscaled tiles");

    Run t =
        run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            tmp.resolve("run").toString(),
            "--model",
            "mlp:768-32-3",
            "--epochs",
            "2",
            "--batch-size",
            "8",
            "--set",
            "ramtrain.train.threads=1");
    assertEquals(0, t.status(), t.err());
    assertTrue(t.out().contains("val accuracy"), t.out());
    assertEquals(
        2,
        Files.readAllLines(tmp.resolve("run/metrics.jsonl")).stream()
            .filter(l -> l.contains("\"type\":\"epoch\""))
            .count());

    assertTrue(Files.exists(tmp.resolve("run/checkpoints/epoch-0002/model.safetensors")));
    String html = Files.readString(tmp.resolve("run/report/index.html"));
    assertTrue(html.contains("Confusion matrix (counts)") && html.contains("circle"), html);
    var confusion = ImageIO.read(tmp.resolve("run/report/confusion.png").toFile());
    assertTrue(confusion.getWidth() > 100, "a drawn confusion matrix");
    assertEquals(450, ImageIO.read(tmp.resolve("run/report/loss.png").toFile()).getHeight());
    // The checkpoint records what the run resolved and what built it; the report shows both.
    var state =
        new com.fasterxml.jackson.databind.ObjectMapper()
            .readTree(tmp.resolve("run/checkpoints/epoch-0002/state.json").toFile());
    assertEquals("2", state.path("config").path("ramtrain.train.epochs").asText());
    assertEquals("8", state.path("config").path("ramtrain.train.batch-size").asText());
    assertTrue(state.path("build").path("commit").asText().matches("[0-9a-f]{40}.*"), "" + state);
    assertTrue(html.contains("ramtrain.train.batch-size") && html.contains("Build"), "settings");
    Path index = tmp.resolve("run/report/index.html");
    Files.delete(index);
    Run redrawn = run("report", tmp.resolve("run").toString());
    assertEquals(0, redrawn.status(), redrawn.err());
    assertTrue(Files.readString(index).contains("Confusion matrix (counts)"), "from what it kept");
    Run two = run("report", tmp.resolve("run").toString(), tmp.resolve("run").toString());
    assertEquals(2, two.status(), "several runs need -o");
    assertTrue(two.err().contains("-o DIR"), two.err());
    Run notRun = run("report", tmp.toString());
    assertEquals(2, notRun.status());
    assertTrue(notRun.err().contains("is not a ramtrain run directory"), notRun.err());
    Run resumed =
        run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            tmp.resolve("run").toString(),
            "--model",
            "mlp:768-32-3",
            "--epochs",
            "3",
            "--batch-size",
            "8",
            "--resume",
            "--offload",
            "on",
            "--set",
            "ramtrain.train.threads=1",
            "--set",
            "ramtrain.train.log-every=1");
    // A resident run's checkpoint resumes offloaded (optimizer on the host), the plan printed.
    assertEquals(0, resumed.status(), resumed.err());
    assertTrue(resumed.out().contains("after 2 epochs"), resumed.out());
    assertTrue(resumed.out().contains("placement      offloaded"), resumed.out());
    assertTrue(
        Files.readString(tmp.resolve("run/metrics.jsonl")).contains("\"h2d_bytes\""),
        "offload metrics per step");
    assertTrue(Files.exists(tmp.resolve("run/checkpoints/epoch-0003/state.json")));

    // Evaluating the last checkpoint on val reproduces the training run's final val accuracy.
    String trained = resumed.out().replaceAll("(?s).*val accuracy ([0-9.]+).*", "$1");
    Run eval =
        run(
            "evaluate",
            "-c",
            tmp.resolve("run").toString(),
            "-d",
            dataset.toString(),
            "--confusion",
            tmp.resolve("confusion.png").toString(),
            "--set",
            "ramtrain.train.batch-size=8",
            "--set",
            "ramtrain.train.threads=1");
    assertEquals(0, eval.status(), eval.err());
    assertTrue(eval.out().contains("accuracy " + trained), trained + " vs " + eval.out());
    assertTrue(Files.exists(tmp.resolve("confusion.png")));
    // Without a path the matrix goes into the run's report folder, named after split and
    // checkpoint (never the current directory, never over the training report's files).
    Run evalDefault =
        run(
            "evaluate",
            "-c",
            tmp.resolve("run").toString(),
            "-d",
            dataset.toString(),
            "--set",
            "ramtrain.train.batch-size=8");
    assertEquals(0, evalDefault.status(), evalDefault.err());
    String latest = Files.readString(tmp.resolve("run/checkpoints/latest")).strip();
    Path drawn = tmp.resolve("run/report/evaluate-val-" + latest + ".png");
    assertTrue(Files.size(drawn) > 1000, evalDefault.out());
    assertTrue(evalDefault.out().contains("confusion matrix " + drawn), evalDefault.out());

    Run tooSmall =
        run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            tmp.resolve("small").toString(),
            "--model",
            "mlp:768-32-3",
            "--batch-size",
            "8",
            "--offload",
            "on",
            "--device-budget",
            "100KiB");
    assertEquals(Main.EXIT_USAGE, tooSmall.status(), tooSmall.err());
    assertTrue(
        tooSmall.err().contains("ramtrain.offload.budget") && tooSmall.err().contains("layer fc1"),
        tooSmall.err());

    Run bad =
        run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            tmp.resolve("bad").toString(),
            "--model",
            "mlp:100-3");
    assertEquals(Main.EXIT_USAGE, bad.status());
    assertTrue(
        bad.err().contains("ramtrain.train.model = 'mlp:100-3' takes 100 values per sample"),
        bad.err());
    assertTrue(!Files.exists(tmp.resolve("bad")), "checked before the run directory is made");

    Run again = run("preprocess", "-i", images.toString(), "-o", dataset.toString());
    assertEquals(Main.EXIT_USAGE, again.status());
    assertTrue(again.err().contains("already holds a dataset"), again.err());
  }

  /** Correct predictions an {@code evaluate} output reports: accuracy times samples. */
  private static long correct(String evaluateOutput) {
    var m =
        java.util.regex.Pattern.compile("accuracy ([0-9.]+), loss [0-9.]+ over ([0-9,]+) samples")
            .matcher(evaluateOutput);
    assertTrue(m.find(), evaluateOutput);
    return Math.round(Double.parseDouble(m.group(1)) * Long.parseLong(m.group(2).replace(",", "")));
  }

  @Test
  void predictOnTheRawFilesAgreesWithEvaluateOnTheirShards() throws Exception {
    // No train/serve skew: predict decodes and resizes the raw images itself, evaluate reads the
    // shards preprocessing made of the same images; both must classify them identically.
    predictAgreesWithEvaluate();
  }

  @Test
  void aRunOnRandomResizedCropsEvaluatesAndPredictsOnCentreCrops() throws Exception {
    // Trained on 16x16 random resized crops of 20x20 stored images, colour-jittered and mixed,
    // evaluated and served as timm does: resized (shorter side 18 at crop-pct 0.875) and
    // centre-cropped to 16x16.
    Path runDir =
        predictAgreesWithEvaluate(
            "--augment",
            "rrc",
            "--height",
            "16",
            "--width",
            "16",
            "--color-jitter",
            "0.4",
            "--mixup",
            "0.8",
            "--cutmix",
            "1.0");
    java.util.Map<String, Object> state = Checkpoints.latestState(runDir);
    assertEquals(List.of(16, 16, 3), state.get("image"), "the model's input: the crop's size");
    assertEquals(
        java.util.Map.of(
            "height",
            16,
            "width",
            16,
            "crop_pct",
            0.875,
            "stored",
            List.of(20, 20, 3),
            "filter",
            "preprocessing"),
        state.get("eval_crop"));
    Run noCrop =
        run(
            "train",
            "-d",
            tmp.resolve("dataset").toString(),
            "-o",
            tmp.resolve("run2").toString(),
            "--height",
            "16");
    assertEquals(Main.EXIT_USAGE, noCrop.status(), noCrop.err());
    assertTrue(noCrop.err().contains("ramtrain.train.augment.height"), noCrop.err());
  }

  private Path predictAgreesWithEvaluate(String... trainFlags) throws Exception {
    Path images = tmp.resolve("images");
    assertEquals(
        0,
        run(
                "generate",
                "-o",
                images.toString(),
                "--classes",
                "3",
                "--images-per-class",
                "12",
                "--width",
                "48", // not square: crop, stretch and letterbox give different pixels
                "--height",
                "32")
            .status());
    Path dataset = tmp.resolve("dataset");
    Run p =
        run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            dataset.toString(),
            "--height",
            "20",
            "--width",
            "20",
            "--resize",
            "letterbox",
            "--set",
            "ramtrain.etl.val-fraction=0.3");
    assertEquals(0, p.status(), p.err());
    Path runDir = tmp.resolve("run");
    List<String> train =
        new ArrayList<>(
            List.of(
                "train",
                "-d",
                dataset.toString(),
                "-o",
                runDir.toString(),
                "--model",
                "cnn:cb4-p-d0.2-f16-3",
                "--epochs",
                "3",
                "--batch-size",
                "6",
                "--set",
                "ramtrain.train.threads=1"));
    train.addAll(List.of(trainFlags));
    Run t = run(train.toArray(String[]::new));
    assertEquals(0, t.status(), t.err());
    long expected = 0;
    for (String split : new String[] {"train", "val"}) {
      Run e =
          run(
              "evaluate",
              "-c",
              runDir.toString(),
              "-d",
              dataset.toString(),
              "--split",
              split,
              "--confusion",
              tmp.resolve(split + ".png").toString(),
              "--set",
              "ramtrain.train.batch-size=5");
      assertEquals(0, e.status(), e.err());
      expected += correct(e.out());
    }
    Path csv = tmp.resolve("predictions.csv");
    Run pr = run("predict", "-c", runDir.toString(), "-o", csv.toString(), images.toString());
    assertEquals(0, pr.status(), pr.err());
    List<String> lines = Files.readAllLines(csv);
    assertEquals("path,prediction,probability,circle,square,triangle,error", lines.get(0));
    assertEquals(1 + 36, lines.size(), "a row per image");
    assertTrue(!Files.exists(tmp.resolve("predictions.csv.partial")), "published by rename");
    long right = 0;
    for (String line : lines.subList(1, lines.size())) {
      String[] f = line.split(",", -1);
      Path file = Path.of(f[0]);
      right += file.getParent().getFileName().toString().equals(f[1]) ? 1 : 0;
      double sum = 0;
      for (int c = 3; c < 6; c++) {
        sum += Double.parseDouble(f[c]);
      }
      assertEquals(1.0, sum, 1e-5, "probabilities sum to one: " + line);
      assertEquals("", f[6], line);
    }
    assertEquals(expected, right, "predict and evaluate classify the same images alike");

    // A corrupt file gets an error row; the others are still classified; the exit is non-zero.
    Path broken = images.resolve("circle/broken.jpg");
    Files.write(broken, new byte[] {(byte) 0xFF, (byte) 0xD8, (byte) 0xFF, 1, 2, 3});
    Run partial =
        run(
            "predict",
            "-c",
            runDir.toString(),
            "-o",
            csv.toString(),
            broken.toString(),
            images.resolve("square").toString());
    assertEquals(Main.EXIT_FAILURE, partial.status(), partial.err());
    assertTrue(partial.err().contains("1 of 13 images could not be read"), partial.err());
    lines = Files.readAllLines(csv);
    assertEquals(1 + 13, lines.size());
    assertTrue(lines.get(1).startsWith(broken + ",,,"), lines.get(1));
    assertTrue(lines.get(1).split(",", -1)[6].length() > 3, "the error is named: " + lines.get(1));
    return runDir;
  }

  @Test
  void planPrintsThePlacementAndRefusesABudgetTooSmall() {
    Run resident =
        run("plan", "--model", "mlp:784-1024-10", "--batch-size", "64", "--device", "t4");
    assertEquals(0, resident.status(), resident.err());
    assertTrue(resident.out().contains("placement      resident"), resident.out());

    // 4 x 4M-parameter layers: 128 MiB of weights and grads, 256 MiB with AdamW. 100 MiB keeps
    // one layer resident (32 MiB) and streams three through 2 weight + 2 gradient slots (64 MiB).
    List<String> fourLayers =
        List.of(
            "plan",
            "--model",
            "mlp:2048-2048-2048-2048-2048",
            "--batch-size",
            "32",
            "--device",
            "t4",
            "--budget",
            "100MiB");
    Run offloaded = run(fourLayers.toArray(String[]::new));
    assertEquals(0, offloaded.status(), offloaded.err());
    assertTrue(offloaded.out().contains("placement      offloaded"), offloaded.out());
    assertTrue(offloaded.out().contains("streamed       3 layers"), offloaded.out());
    assertTrue(offloaded.out().contains("resident       1 layers"), offloaded.out());
    // the image size it assumed, and what resident training would need: 16 bytes for each of the
    // 4 x 4.2 M parameters (256 MiB) and the batch's activations
    assertTrue(offloaded.out().contains("on 32x32x3 images, batch 32"), offloaded.out());
    assertTrue(offloaded.out().contains("resident needs 258.4 MiB at this batch"), offloaded.out());
    assertFalse(resident.out().contains("resident needs"), resident.out());

    // ZeRO-1 over two ranks: the host copy keeps half of AdamW's moments, 12 bytes a parameter of
    // 16 (the model's parameter count is even: exactly 3/4, to the printed rounding).
    Run zero =
        run(with(fourLayers, "--set", "ramtrain.dist.ranks=2", "--set", "ramtrain.dist.zero=1"));
    assertEquals(0, zero.status(), zero.err());
    assertEquals(0.75 * hostPinnedMiB(offloaded.out()), hostPinnedMiB(zero.out()), 0.1, zero.out());

    // The host update, planned for a T4 on a host of 20 GB/s: AdamW's 28 bytes for each of the
    // 16,785,408 parameters, 23.50 ms; clipped, speculatively (a GPU computes beside the host's
    // cores) with the kept masters and moments read and written and the norm's read, twice that;
    // serially, the update and the norm's read (32 bytes); delayed, the update and the published
    // weights' refresh (36 bytes).
    List<String> onHost = List.of(with(fourLayers, "--set", "ramtrain.plan.host-bandwidth=20e9"));
    Run landing = run(onHost.toArray(String[]::new));
    assertEquals(0, landing.status(), landing.err());
    assertTrue(
        landing
            .out()
            .contains(
                "host update    23.50 ms a step as-gradients-land (host memory 20.0 GB/s given"),
        landing.out());
    Run speculative = run(with(onHost, "--clip-norm", "1"));
    assertTrue(
        speculative.out().contains("host update    47.00 ms a step speculative"),
        speculative.out());
    Run serial =
        run(with(onHost, "--clip-norm", "1", "--set", "ramtrain.offload.clip-update=serial"));
    assertTrue(
        serial.out().contains("host update    26.86 ms a step after-backward"), serial.out());
    Run delayed = run(with(onHost, "--delayed-update"));
    assertTrue(delayed.out().contains("host update    30.21 ms a step delayed"), delayed.out());
    Run badHost = run(with(fourLayers, "--set", "ramtrain.plan.host-bandwidth=fast"));
    assertEquals(Main.EXIT_USAGE, badHost.status(), badHost.out());
    assertTrue(badHost.err().contains("ramtrain.plan.host-bandwidth"), badHost.err());

    Run measured = run("plan", "--model", "cnn:c8-p-10", "--image", "16x16x1");
    assertEquals(0, measured.status(), measured.err());
    assertTrue(measured.out().contains("measured (cpu backend)"), measured.out());

    Run tooSmall =
        run("plan", "--model", "mlp:2048-2048-2048", "--device", "t4", "--budget", "10MiB");
    // A budget the model cannot fit is a bad setting, named, as train calls it.
    assertEquals(Main.EXIT_USAGE, tooSmall.status());
    assertTrue(tooSmall.err().contains("ramtrain.offload.budget"), tooSmall.err());
    assertTrue(tooSmall.err().contains("layer fc"), tooSmall.err());

    Run unknown = run("plan", "--model", "mlp:4-2", "--device", "tpu");
    assertEquals(Main.EXIT_USAGE, unknown.status());
    assertTrue(unknown.err().contains("no device profile 'tpu'"), unknown.err());
    assertTrue(unknown.err().contains("h100-80gb"), unknown.err());
  }

  private static double hostPinnedMiB(String plan) {
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("(?m)^host pinned +([0-9.]+) MiB$").matcher(plan);
    assertTrue(m.find(), plan);
    return Double.parseDouble(m.group(1));
  }

  /**
   * Two data-parallel ranks in a Spark barrier stage (local[2]: two tasks, two rings on loopback)
   * train as one process accumulating their two batches per step does (bit for bit on any CPU: see
   * DataParallelTrainingTest), and only rank 0 writes the run.
   */
  @Test
  void twoRanksTrainAsOneProcessAccumulatingTheirBatches() throws Exception {
    Path images = shapes(tmp.resolve("images"));
    Path dataset = tmp.resolve("dataset");
    Run p =
        run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            dataset.toString(),
            "--height",
            "12",
            "--width",
            "12",
            "--set",
            "ramtrain.etl.val-fraction=0.25");
    assertEquals(0, p.status(), p.err());
    List<String> unbatched =
        List.of(
            "train",
            "-d",
            dataset.toString(),
            "--model",
            "mlp:432-32-3",
            "--epochs",
            "3",
            "--set",
            "ramtrain.train.threads=1",
            "--set",
            "ramtrain.train.keep-checkpoints=0"); // every epoch's, compared below
    List<String> common = List.of(with(unbatched, "--batch-size", "8"));
    Run one =
        run(
            with(
                unbatched,
                "-o",
                tmp.resolve("one").toString(),
                "--batch-size",
                "4",
                "--accumulate",
                "2"));
    assertEquals(0, one.status(), one.err());
    Run two =
        run(
            with(
                common,
                "-o",
                tmp.resolve("two").toString(),
                "--ranks",
                "2",
                "--master",
                "local[2]"));
    assertEquals(0, two.status(), two.err());
    assertTrue(two.out().contains("(2 ranks)"), two.out());
    assertTrue(two.out().contains("training on 1 node of 2 devices"), two.out());
    // Offloaded, local[2]'s two ranks are the devices of one node sharing one host copy (device 0
    // holds it: DataParallelTrainingTest counts the bytes): the same weights still.
    Run shared =
        run(
            with(
                common,
                "-o",
                tmp.resolve("shared").toString(),
                "--ranks",
                "2",
                "--master",
                "local[2]",
                "--offload",
                "on"));
    assertEquals(0, shared.status(), shared.err());
    assertTrue(shared.out().contains("placement      offloaded"), shared.out());
    assertTrue(
        shared.out().contains("node           2 devices sharing one host copy (1 node)"),
        shared.out());

    // --ema on that node: the average in device 0's host copy, evaluated by both devices, is the
    // average two ranks with copies of their own checkpoint, byte for byte.
    List<String> averaging =
        List.of(with(common, "--ranks", "2", "--master", "local[2]", "--offload", "on", "--ema"));
    Run nodeEma = run(with(averaging, "0.9", "-o", tmp.resolve("node-ema").toString()));
    assertEquals(0, nodeEma.status(), nodeEma.err());
    assertTrue(nodeEma.out().contains("training on 1 node of 2 devices"), nodeEma.out());
    Run ownEma =
        run(
            with(
                averaging,
                "0.9",
                "-o",
                tmp.resolve("own-ema").toString(),
                "--set",
                "ramtrain.dist.devices-per-node=1"));
    assertEquals(0, ownEma.status(), ownEma.err());
    assertTrue(ownEma.out().contains("training on 2 nodes of 1 device each"), ownEma.out());
    for (String file : List.of("model.safetensors", "model_ema.safetensors")) {
      assertEquals(
          -1L,
          Files.mismatch(
              tmp.resolve("own-ema/checkpoints/epoch-0003").resolve(file),
              tmp.resolve("node-ema/checkpoints/epoch-0003").resolve(file)),
          file);
    }

    List<String> epochsOne = epochs(tmp.resolve("one"));
    List<String> epochsTwo = epochs(tmp.resolve("two"));
    assertEquals(3, epochsTwo.size(), "rank 0 alone writes each epoch: " + epochsTwo);
    for (int e = 0; e < 3; e++) {
      // The same float per-sample losses summed in doubles in another order: within n·2^-52.
      double a = figure(epochsOne.get(e), "train_loss");
      double b = figure(epochsTwo.get(e), "train_loss");
      assertEquals(a, b, 1000 * 0x1p-52 * Math.abs(a), "train_loss of epoch " + (e + 1));
      assertTrue(epochsTwo.get(e).contains("\"world_size\":2"), epochsTwo.get(e));
      String epoch = String.format("epoch-%04d", e + 1);
      RunMetrics.assertSameTrainedWeights(
          tmp.resolve("one/checkpoints").resolve(epoch),
          tmp.resolve("two/checkpoints").resolve(epoch));
      RunMetrics.assertSameTrainedWeights(
          tmp.resolve("one/checkpoints").resolve(epoch),
          tmp.resolve("shared/checkpoints").resolve(epoch));
    }

    // A trainer task fails within an epoch (the last rank, after step 10, in the first attempt):
    // Spark retries the stage, which resumes from checkpoint step 9 and ends with the weights of
    // the run that never failed, byte for byte.
    Run recovered =
        run(
            with(
                common,
                "-o",
                tmp.resolve("recovered").toString(),
                "--ranks",
                "2",
                "--master",
                "local[2]",
                "--set",
                "ramtrain.train.checkpoint-every=3",
                "--set",
                "ramtrain.dist.fail-once-at-step=10"));
    assertEquals(0, recovered.status(), recovered.err());
    assertTrue(recovered.out().contains("resuming from"), recovered.out());
    assertTrue(recovered.out().contains("step-000000009"), recovered.out());
    assertEquals(
        -1L,
        Files.mismatch(
            tmp.resolve("two/checkpoints/epoch-0003/model.safetensors"),
            tmp.resolve("recovered/checkpoints/epoch-0003/model.safetensors")));

    // Resident ZeRO-2 (each rank's device keeps its share of AdamW's moments): unclipped, the same
    // weights as ranks keeping all of them; a retried stage resumes from step 9's checkpoint, whose
    // moments the ranks gathered whole, and ends with those weights again, byte for byte.
    Run zero =
        run(
            with(
                common,
                "-o",
                tmp.resolve("zero").toString(),
                "--ranks",
                "2",
                "--master",
                "local[2]",
                "--set",
                "ramtrain.dist.devices-per-node=1",
                "--set",
                "ramtrain.dist.zero=2",
                "--set",
                "ramtrain.train.checkpoint-every=3",
                "--set",
                "ramtrain.dist.fail-once-at-step=10"));
    assertEquals(0, zero.status(), zero.err());
    assertTrue(zero.out().contains("step-000000009"), zero.out());
    assertTrue(zero.out().contains("placement: resident"), zero.out());
    assertTrue(
        zero.out()
            .contains(
                "training on 2 nodes of 1 device each, ZeRO-2: each rank keeps the optimizer"
                    + " state and reduced gradients of its 1/2 share"),
        zero.out());
    assertEquals(
        -1L,
        Files.mismatch(
            tmp.resolve("two/checkpoints/epoch-0003/model.safetensors"),
            tmp.resolve("zero/checkpoints/epoch-0003/model.safetensors")));

    // ZeRO over nodes: four ranks as two nodes of two devices offloading from one host copy each,
    // whose device 0 keeps its node's half of the moments and reduced gradients; the weights and
    // the moments a checkpoint gathers are those of the same nodes without ZeRO, byte for byte.
    List<String> fourRanks =
        List.of(
            with(
                common,
                "--ranks",
                "4",
                "--master",
                "local[4]",
                "--offload",
                "on",
                "--set",
                "ramtrain.dist.devices-per-node=2"));
    Run nodes = run(with(fourRanks, "-o", tmp.resolve("nodes").toString()));
    assertEquals(0, nodes.status(), nodes.err());
    Run nodesZero =
        run(
            with(
                fourRanks,
                "-o",
                tmp.resolve("nodes-zero").toString(),
                "--set",
                "ramtrain.dist.zero=2"));
    assertEquals(0, nodesZero.status(), nodesZero.err());
    assertTrue(
        nodesZero
            .out()
            .contains(
                "training on 2 nodes of 2 devices each, ZeRO-2: each node keeps the optimizer"
                    + " state and reduced gradients of its 1/2 share"),
        nodesZero.out());
    // Resident, each device of a node holds its own weights: ZeRO over nodes is refused there.
    Run resident =
        run(
            with(
                common,
                "-o",
                tmp.resolve("nodes-resident").toString(),
                "--ranks",
                "4",
                "--master",
                "local[4]",
                "--set",
                "ramtrain.dist.devices-per-node=2",
                "--set",
                "ramtrain.dist.zero=1"));
    assertEquals(2, resident.status(), resident.out() + resident.err());
    assertTrue(
        resident.err().contains("ramtrain.dist.zero: with 2 devices a node ZeRO partitions"),
        resident.err());
    for (String file : List.of("model.safetensors", "optimizer.safetensors")) {
      assertEquals(
          -1L,
          Files.mismatch(
              tmp.resolve("nodes/checkpoints/epoch-0003").resolve(file),
              tmp.resolve("nodes-zero/checkpoints/epoch-0003").resolve(file)),
          file);
    }

    // Own shards: each rank opens only the shards assigned to it, together all of the dataset.
    Run own =
        run(
            with(
                common,
                "-o",
                tmp.resolve("own").toString(),
                "--ranks",
                "2",
                "--master",
                "local[2]",
                "--set",
                "ramtrain.dist.shards=own"));
    assertEquals(0, own.status(), own.err());
    java.util.regex.Matcher opened =
        java.util.regex.Pattern.compile("rank \\d of 2: (\\d+) train / (\\d+) val samples")
            .matcher(own.out());
    int[] train = new int[2];
    int[] val = new int[2];
    for (int r = 0; r < 2; r++) {
      assertTrue(opened.find(), own.out());
      train[r] = Integer.parseInt(opened.group(1));
      val[r] = Integer.parseInt(opened.group(2));
    }
    java.util.regex.Matcher whole =
        java.util.regex.Pattern.compile("on " + dataset + ": (\\d+) train / (\\d+) val samples")
            .matcher(one.out());
    assertTrue(whole.find(), one.out());
    assertEquals(Integer.parseInt(whole.group(1)), train[0] + train[1], own.out());
    assertEquals(Integer.parseInt(whole.group(2)), val[0] + val[1], own.out());
    assertTrue(train[0] > 0 && train[1] > 0, own.out());
    assertEquals(3, epochs(tmp.resolve("own")).size());

    // A run directory on another Hadoop filesystem (a stand-in for HDFS or S3A that java.nio
    // cannot reach): rank 0 trains into a local copy and publishes each checkpoint, the other rank
    // resumes from what was published, the driver writes the report there. The same weights.
    Path remoteDir = tmp.resolve("remote-run");
    Run remote =
        run(
            with(
                common,
                "-o",
                "remote://" + remoteDir,
                "--ranks",
                "2",
                "--master",
                "local[2]",
                "--set",
                "ramtrain.train.checkpoint-every=3",
                "--set",
                "ramtrain.dist.fail-once-at-step=10"));
    assertEquals(0, remote.status(), remote.err());
    assertTrue(remote.out().contains("resuming from"), remote.out());
    assertTrue(remote.out().contains("report remote:" + remoteDir), remote.out());
    assertEquals(
        -1L,
        Files.mismatch(
            tmp.resolve("two/checkpoints/epoch-0003/model.safetensors"),
            remoteDir.resolve("checkpoints/epoch-0003/model.safetensors")));
    assertEquals("epoch-0003", Files.readString(remoteDir.resolve("checkpoints/latest")).strip());
    assertEquals(3, epochs(remoteDir).size());
    assertTrue(Files.exists(remoteDir.resolve("report/index.html")));
    assertTrue(
        Checkpoints.isName(Files.readString(remoteDir.resolve("checkpoints/best"))),
        "the best checkpoint is published too");
    try (var entries = Files.list(remoteDir.resolve("checkpoints"))) {
      assertTrue(
          entries.noneMatch(e -> e.getFileName().toString().startsWith(".publishing")),
          "nothing half-published is left");
    }
    // A new run refuses a remote directory that holds one.
    Run taken =
        run(with(common, "-o", "remote://" + remoteDir, "--ranks", "2", "--master", "local[2]"));
    assertEquals(Main.EXIT_USAGE, taken.status(), taken.err());
    assertTrue(taken.err().contains("already holds a training run"), taken.err());

    // A rank's own error reaches the console, named by its rank (Spark's names none).
    Run again =
        run(
            with(
                common,
                "-o",
                tmp.resolve("two").toString(),
                "--ranks",
                "2",
                "--master",
                "local[2]"));
    assertEquals(Main.EXIT_USAGE, again.status(), again.err());
    assertTrue(
        again.err().contains("rank 0: ramtrain.train.output = ")
            && again.err().contains("already holds a training run"),
        again.err());

    // A global batch the ranks cannot share evenly is refused before any task starts.
    List<String> batchOf7 = new java.util.ArrayList<>(common);
    batchOf7.set(batchOf7.indexOf("8"), "7");
    Run uneven =
        run(
            with(
                batchOf7,
                "-o",
                tmp.resolve("uneven").toString(),
                "--ranks",
                "2",
                "--master",
                "local[2]"));
    assertEquals(Main.EXIT_USAGE, uneven.status(), uneven.err());
    assertTrue(
        uneven.err().contains("ramtrain.train.batch-size = 7 cannot be split evenly"),
        uneven.err());
  }

  /**
   * The pipeline: shards made in memory and trained on by two ranks, each on its own shards (none
   * over the network in local mode); a rank failing mid-epoch is recovered by Spark, and the run
   * ends with the uninterrupted run's weights, byte for byte.
   */
  @Test
  void pipelineTrainsRanksOnTheirOwnInMemoryShardsAndRecovers() throws Exception {
    Path images = shapes(tmp.resolve("images"));
    List<String> common =
        List.of(
            "pipeline",
            "-i",
            images.toString(),
            "--height",
            "12",
            "--width",
            "12",
            "--model",
            "mlp:432-32-3",
            "--epochs",
            "2",
            "--batch-size",
            "8",
            "--ranks",
            "2",
            "--master",
            "local[2]",
            "--set",
            "ramtrain.etl.val-fraction=0.25",
            "--set",
            "ramtrain.train.threads=1");
    Run plain = run(with(common, "-o", tmp.resolve("plain").toString()));
    assertEquals(0, plain.status(), plain.err());
    assertTrue(plain.out().contains("dataset (in memory)"), plain.out());
    // Both ranks run in this process: each says its own numbers, rank 0 what they share, once.
    assertTrue(plain.out().contains("rank 0 of 2") && plain.out().contains("rank 1 of 2"));
    assertEquals(
        1, plain.out().split("training mlp:432-32-3 ", -1).length - 1, "once: " + plain.out());
    assertEquals(1, plain.out().split("placement: ", -1).length - 1, "once: " + plain.out());
    assertTrue(plain.out().contains("2 ranks read "), plain.out());
    assertTrue(plain.out().contains("0.0 MB of it over the network"), plain.out());
    assertTrue(plain.out().contains("(2 ranks)"), plain.out());
    List<String> epochs = epochs(tmp.resolve("plain"));
    assertEquals(2, epochs.size(), "rank 0 alone writes each epoch: " + epochs);
    assertTrue(epochs.get(1).contains("\"world_size\":2"), epochs.get(1));
    // Every val sample evaluated once over the two ranks.
    java.util.regex.Matcher val =
        java.util.regex.Pattern.compile("\\+ (\\d+) val samples").matcher(plain.out());
    assertTrue(val.find(), plain.out());
    assertTrue(plain.out().contains("over " + val.group(1) + " samples (2 ranks)"), plain.out());

    // The same two ranks as the devices of one node (one trainer task, the executor's shards split
    // over its devices, none moved), offloaded from one host copy: the same weights, byte for byte.
    Run node =
        run(
            with(
                common,
                "-o",
                tmp.resolve("node").toString(),
                "--offload",
                "on",
                "--set",
                "ramtrain.dist.devices-per-node=2"));
    assertEquals(0, node.status(), node.err());
    assertTrue(node.out().contains("training on 1 node of 2 devices"), node.out());
    assertTrue(node.out().contains("(0 shards given to another node"), node.out());
    assertEquals(
        -1L,
        Files.mismatch(
            tmp.resolve("plain/checkpoints/epoch-0002/model.safetensors"),
            tmp.resolve("node/checkpoints/epoch-0002/model.safetensors")));

    Run recovered =
        run(
            with(
                common,
                "-o",
                tmp.resolve("recovered").toString(),
                "--set",
                "ramtrain.train.checkpoint-every=2",
                "--set",
                "ramtrain.dist.fail-once-at-step=5"));
    assertEquals(0, recovered.status(), recovered.err());
    assertTrue(recovered.out().contains("resuming from"), recovered.out());
    assertEquals(
        -1L,
        Files.mismatch(
            tmp.resolve("plain/checkpoints/epoch-0002/model.safetensors"),
            tmp.resolve("recovered/checkpoints/epoch-0002/model.safetensors")));

    // A rank failing before the first checkpoint: the retry starts the new run again over what
    // the failed attempt wrote, and ends the same.
    Run early =
        run(
            with(
                common,
                "-o",
                tmp.resolve("early").toString(),
                "--set",
                "ramtrain.dist.fail-once-at-step=2"));
    assertEquals(0, early.status(), early.err());
    assertEquals(
        -1L,
        Files.mismatch(
            tmp.resolve("plain/checkpoints/epoch-0002/model.safetensors"),
            tmp.resolve("early/checkpoints/epoch-0002/model.safetensors")));
    assertEquals(2, epochs(tmp.resolve("early")).size(), "the failed attempt's lines are gone");

    // More ranks than the shards can feed: refused before training, naming the keys.
    Run starved =
        run(
            with(
                common, "-o", tmp.resolve("starved").toString(), "--set", "ramtrain.etl.shards=1"));
    assertEquals(Main.EXIT_USAGE, starved.status(), starved.err());
    assertTrue(starved.err().contains("rank 1 holds 0 train samples"), starved.err());
  }

  /** 72 generated 16x16 shape images in 3 classes under {@code dir}. */
  private static Path shapes(Path dir) {
    Run g =
        run(
            "generate",
            "-o",
            dir.toString(),
            "--classes",
            "3",
            "--images-per-class",
            "24",
            "--width",
            "16",
            "--height",
            "16");
    assertEquals(0, g.status(), g.err());
    return dir;
  }

  private static String[] with(List<String> common, String... more) {
    List<String> all = new java.util.ArrayList<>(common);
    all.addAll(List.of(more));
    return all.toArray(String[]::new);
  }

  /** No command is a usage error; the command list gives each command's whole summary. */
  @Test
  void noCommandPrintsTheCommandsAndExitsWithUsageStatus() {
    Run r = run();
    assertEquals(Main.EXIT_USAGE, r.status());
    List<String> commands =
        List.of(
            "generate",
            "preprocess",
            "inspect",
            "demo",
            "pipeline",
            "train",
            "evaluate",
            "predict",
            "plan",
            "report");
    for (String command : commands) {
      java.util.regex.Matcher line =
          java.util.regex.Pattern.compile("(?m)^  " + command + " +(.+)$").matcher(r.err());
      assertTrue(line.find(), command + " listed:\n" + r.err());
      assertTrue(line.group(1).endsWith("."), "a whole sentence: " + line.group(0));
    }
  }

  /**
   * The knobs a PyTorch user looks for are flags, each showing its default in --help, and they
   * reach the run (its checkpoint's settings).
   */
  @Test
  void pytorchKnobsAreFlagsWithTheirDefaultsShown() throws Exception {
    Run help = run("train", "--help");
    assertEquals(0, help.status());
    String text = help.out().replaceAll("\\s+", " ");
    for (String shown :
        List.of(
            "(ramtrain.train.epochs). Default: 5.",
            "--weight-decay",
            "--schedule",
            "--clip-norm",
            "--label-smoothing",
            "--precision",
            "--workers",
            "--prefetch")) {
      assertTrue(text.contains(shown), shown + " in\n" + help.out());
    }
    assertTrue(text.matches(".*weight-decay\\)\\. Default: 0\\.01\\..*"), help.out());

    Path dataset = tinyShapesDataset();
    // The default batch of 256 is more than the dataset's train split: a usage error naming the
    // key, not a schedule's internal complaint.
    Run tooBig =
        run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            tmp.resolve("big").toString(),
            "--model",
            "mlp:192-8-3",
            "--schedule",
            "cosine");
    assertEquals(Main.EXIT_USAGE, tooBig.status(), tooBig.err());
    assertTrue(tooBig.err().contains("ramtrain.train.batch-size = 256: the "), tooBig.err());
    assertTrue(tooBig.err().contains("make no full batch"), tooBig.err());
    Run r =
        run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            tmp.resolve("run").toString(),
            "--model",
            "mlp:192-8-3",
            "--epochs",
            "1",
            "--batch-size",
            "16",
            "--weight-decay",
            "0.05",
            "--schedule",
            "cosine",
            "--clip-norm",
            "1",
            "--label-smoothing",
            "0.1",
            "--precision",
            "bf16",
            "--workers",
            "1",
            "--prefetch",
            "2",
            "--accumulate",
            "2");
    assertEquals(0, r.status(), r.err());
    String state =
        Files.readString(tmp.resolve("run/checkpoints/epoch-0001/state.json"))
            .replaceAll("\\s", "");
    for (String setting :
        List.of(
            "\"ramtrain.train.weight-decay\":\"0.05\"",
            "\"ramtrain.train.schedule\":\"cosine\"",
            "\"ramtrain.train.clip-norm\":\"1.0\"",
            "\"ramtrain.train.label-smoothing\":\"0.1\"",
            "\"ramtrain.train.precision\":\"bf16\"",
            "\"ramtrain.train.accumulate\":\"2\"")) {
      assertTrue(state.contains(setting), setting + " in " + state);
    }
    // plan -c plans the run's own model as it trained (bf16 layers at 8x8x3), as plan does when
    // told the same; not the fp32 model of the defaults.
    Run ofRun = run("plan", "-c", tmp.resolve("run").toString(), "--device", "t4");
    assertEquals(0, ofRun.status(), ofRun.err());
    String[] planned = {"plan", "--model", "mlp:192-8-3", "--image", "8x8x3", "--device", "t4"};
    Run told = run(concat(planned, "--set", "ramtrain.train.precision=bf16"));
    Run fp32 = run(planned);
    assertEquals(told.out(), ofRun.out());
    assertNotEquals(fp32.out(), ofRun.out());
    // Accumulating the gradients of an offloaded model is not built: a usage error naming the key.
    Run offloaded =
        run(
            "train",
            "-d",
            dataset.toString(),
            "-o",
            tmp.resolve("offloaded").toString(),
            "--model",
            "mlp:192-8-3",
            "--batch-size",
            "4",
            "--accumulate",
            "2",
            "--offload",
            "on");
    assertEquals(Main.EXIT_USAGE, offloaded.status(), offloaded.err());
    assertTrue(offloaded.err().contains("ramtrain.train.accumulate = 2"), offloaded.err());
  }

  /**
   * The best epoch's checkpoint is named checkpoints/best, and a run stops once the metric has not
   * improved for --early-stop-patience epochs; resumed with the same patience it trains no more.
   */
  @Test
  void earlyStoppingKeepsTheBestCheckpoint() throws Exception {
    Path dataset = tinyShapesDataset();
    String[] train = {
      "train",
      "-d",
      dataset.toString(),
      "-o",
      tmp.resolve("run").toString(),
      "--model",
      "mlp:192-8-3",
      "--epochs",
      "6",
      "--batch-size",
      "8",
      "--early-stop-patience",
      "2",
      // no later epoch beats the first by 100: epochs 2 and 3 do not improve, and it stops
      "--set",
      "ramtrain.train.early-stop-min-delta=100"
    };
    Run r = run(train);
    assertEquals(0, r.status(), r.err());
    assertTrue(r.out().contains("best epoch 1: val_loss"), r.out());
    Path metrics = tmp.resolve("run/metrics.jsonl");
    assertEquals(3, epochRecords(metrics), "stopped after epoch 3 of 6");
    assertEquals("epoch-0001", Files.readString(tmp.resolve("run/checkpoints/best")));
    var state =
        new com.fasterxml.jackson.databind.ObjectMapper()
            .readTree(tmp.resolve("run/checkpoints/epoch-0003/state.json").toFile());
    assertEquals(1, state.path("best").path("epoch").asInt(), state.toString());
    assertEquals(2, state.path("best").path("epochs_since").asInt());

    Run resumed =
        run(
            java.util.stream.Stream.concat(
                    java.util.Arrays.stream(train), java.util.stream.Stream.of("--resume"))
                .toArray(String[]::new));
    assertEquals(0, resumed.status(), resumed.err());
    assertEquals(3, epochRecords(metrics), "a run that stopped early stays stopped");

    Run best =
        run("evaluate", "-c", tmp.resolve("run").toString(), "--best", "-d", dataset.toString());
    assertEquals(0, best.status(), best.err());
    assertTrue(best.out().contains("epoch-0001 on "), best.out());
    Run latest = run("evaluate", "-c", tmp.resolve("run").toString(), "-d", dataset.toString());
    assertTrue(latest.out().contains("epoch-0003 on "), latest.out());
    // Without -d, the dataset the run trained on; --batch-size changes no result.
    Run itsOwn = run("evaluate", "-c", tmp.resolve("run").toString(), "--batch-size", "3");
    assertEquals(0, itsOwn.status(), itsOwn.err());
    String result = latest.out().lines().findFirst().orElseThrow();
    assertEquals(result, itsOwn.out().lines().findFirst().orElseThrow());
  }

  /** The generated shapes, preprocessed to 8×8 into tmp/ds. */
  private Path tinyShapesDataset() {
    Path images = shapes(tmp.resolve("images"));
    Path dataset = tmp.resolve("ds");
    Run p =
        run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            dataset.toString(),
            "--height",
            "8",
            "--width",
            "8");
    assertEquals(0, p.status(), p.err());
    return dataset;
  }

  private static long epochRecords(Path metrics) throws java.io.IOException {
    return Files.readAllLines(metrics).stream()
        .filter(l -> l.contains("\"type\":\"epoch\""))
        .count();
  }

  /** A bad value: one line naming the option and the value, and where the help is. */
  @Test
  void aBadValueIsOneLineNotTheWholeUsage() {
    Run r = run("train", "--epochs", "abc");
    assertEquals(Main.EXIT_USAGE, r.status());
    assertEquals(
        List.of(
            "ramtrain train: error: Invalid value for option '--epochs': 'abc' is not an int",
            "see 'ramtrain train --help'"),
        r.err().strip().lines().toList());
    Run typo = run("trian");
    assertEquals(Main.EXIT_USAGE, typo.status());
    assertTrue(typo.err().contains("Did you mean: ramtrain plan or ramtrain train?"), typo.err());
    assertFalse(typo.err().contains("Usage:"), typo.err());
  }

  @Test
  void badSettingExitsWithUsageStatusNamingTheKey() {
    Run r = run("generate", "-o", tmp.toString(), "--set", "ramtrain.generate.clases=3");
    assertEquals(Main.EXIT_USAGE, r.status());
    assertTrue(r.err().contains("unknown configuration key ramtrain.generate.clases"), r.err());
    assertTrue(r.err().contains("did you mean ramtrain.generate.classes"), r.err());
    assertTrue(!r.err().contains("\tat "), "no stack trace for a bad setting: " + r.err());

    r = run("generate", "-o", tmp.toString(), "--classes", "12");
    assertEquals(Main.EXIT_USAGE, r.status());
    assertTrue(
        r.err().contains("ramtrain.generate") && r.err().contains("classes must be in [2, 8]"),
        r.err());
  }

  @Test
  void aMissingDatasetIsAUsageErrorNamingTheManifest() {
    // a wrong path given, as preprocess's missing input: exit 2, as the README's table says
    Run r = run("inspect", tmp.resolve("nothing").toString());
    assertEquals(Main.EXIT_USAGE, r.status());
    assertTrue(r.err().contains("manifest.json is missing"), r.err());
    assertTrue(r.err().contains("does not exist"), r.err());
    Run t =
        run(
            "train",
            "-d",
            tmp.resolve("nothing").toString(),
            "-o",
            tmp.resolve("run").toString(),
            "--model",
            "mlp:192-16-3");
    assertEquals(Main.EXIT_USAGE, t.status(), t.err());
    assertTrue(t.err().contains("manifest.json is missing"), t.err());
    assertFalse(Files.exists(tmp.resolve("run")));
  }

  @Test
  void everyCommandHasHelp() {
    for (String command :
        new String[] {
          "generate", "preprocess", "inspect", "demo", "train", "evaluate", "predict"
        }) {
      Run r = run(command, "--help");
      assertEquals(0, r.status(), command);
      assertTrue(r.out().contains("Usage: ramtrain " + command), r.out());
      assertTrue(r.out().contains("--config"), r.out());
    }
  }

  private static String[] concat(String[] first, String... more) {
    String[] all = java.util.Arrays.copyOf(first, first.length + more.length);
    System.arraycopy(more, 0, all, first.length, more.length);
    return all;
  }
}
