package dev.ramtrain.jobs.cli;

import static dev.ramtrain.jobs.cli.MainTest.run;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.jobs.Main;
import dev.ramtrain.jobs.RunMetrics;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A dataset of JPEG rows end to end: preprocessed with --store jpeg, inspected (what it takes
 * beside raw pixels, every JPEG decoded), trained on load-time random resized crops, evaluated; and
 * a stored JPEG that does not decode failing the run by name, or skipped.
 */
class JpegDatasetTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  @TempDir Path tmp;
  private Path images;

  @BeforeEach
  void images() {
    images = tmp.resolve("images");
    MainTest.Run g =
        run(
            "generate",
            "-o",
            images.toString(),
            "--classes",
            "3",
            "--images-per-class",
            "12",
            "--width",
            "72",
            "--height",
            "56");
    assertEquals(0, g.status(), g.err());
  }

  private Path preprocess(String store) {
    Path dataset = tmp.resolve("dataset-" + store);
    MainTest.Run p =
        run(
            "preprocess",
            "-i",
            images.toString(),
            "-o",
            dataset.toString(),
            "--height",
            "40",
            "--width",
            "40",
            "--store",
            store,
            "--set",
            "ramtrain.etl.val-fraction=0.25");
    assertEquals(0, p.status(), p.err());
    return dataset;
  }

  private static long bytes(Path dataset) throws Exception {
    JsonNode m = JSON.readTree(dataset.resolve("manifest.json").toFile());
    return m.path("splits").path("train").path("bytes").asLong()
        + m.path("splits").path("val").path("bytes").asLong();
  }

  @Test
  void aJpegDatasetIsInspectedTrainedOnCropsAndEvaluated() throws Exception {
    Path raw = preprocess("raw");
    Path jpeg = preprocess("jpeg");
    JsonNode manifest = JSON.readTree(jpeg.resolve("manifest.json").toFile());
    assertEquals("jpeg", manifest.path("image").path("storage").asText());
    assertTrue(
        JSON.readTree(raw.resolve("manifest.json").toFile())
            .path("image")
            .path("storage")
            .isMissingNode(),
        "a raw manifest is as it always was");
    assertTrue(bytes(jpeg) * 2 < bytes(raw), bytes(jpeg) + " vs " + bytes(raw));

    MainTest.Run i =
        run(
            "inspect",
            jpeg.toString(),
            "--samples",
            "4",
            "--sheet",
            tmp.resolve("sheet.png").toString(),
            "--verify-all");
    assertEquals(0, i.status(), i.err());
    assertTrue(i.out().contains("40x40x3 uint8 HWC, stored jpeg (quality 90)"), i.out());
    assertTrue(i.out().contains("every JPEG decodes"), i.out());
    assertTrue(i.out().contains("EXIF orientation applied"), i.out());
    assertTrue(i.out().contains("as raw pixels"), i.out());

    Path runDir = tmp.resolve("run");
    MainTest.Run t =
        run(
            "train",
            "-d",
            jpeg.toString(),
            "-o",
            runDir.toString(),
            "--model",
            "cnn:cb4-p-f16-3",
            "--epochs",
            "2",
            "--batch-size",
            "6",
            "--augment",
            "rrc",
            "--height",
            "16",
            "--width",
            "16",
            "--set",
            "ramtrain.train.threads=1");
    assertEquals(0, t.status(), t.err());
    List<String> epochs = RunMetrics.epochs(runDir);
    assertEquals(2, epochs.size());
    assertTrue(RunMetrics.figure(epochs.get(0), "loader_decode_ms") > 0, epochs.get(0));
    assertEquals(0, RunMetrics.figure(epochs.get(0), "bad_samples_skipped"));

    MainTest.Run e = run("evaluate", "-c", runDir.toString(), "-d", jpeg.toString());
    assertEquals(0, e.status(), e.err());
    assertTrue(e.out().contains("accuracy"), e.out());
    // Read two shards at a time, evaluation walks the shards in the same order: the same figures.
    MainTest.Run windowed =
        run(
            "evaluate",
            "-c",
            runDir.toString(),
            "-d",
            jpeg.toString(),
            "--set",
            "ramtrain.train.shard-window=2");
    assertEquals(0, windowed.status(), windowed.err());
    assertEquals(figures(e.out()), figures(windowed.out()));
  }

  /** The "accuracy …, loss … over … samples" part of evaluate's output. */
  private static String figures(String evaluateOutput) {
    var m =
        java.util.regex.Pattern.compile("accuracy [0-9.]+, loss [0-9.]+ over [0-9,]+ samples")
            .matcher(evaluateOutput);
    assertTrue(m.find(), evaluateOutput);
    return m.group();
  }

  @Test
  void autoStoresJpegWhereItHalvesThePixelsAndTrains() throws Exception {
    Path auto = preprocess("auto");
    JsonNode manifest = JSON.readTree(auto.resolve("manifest.json").toFile());
    assertEquals("auto", manifest.path("image").path("storage").asText());
    MainTest.Run t =
        run(
            "train",
            "-d",
            auto.toString(),
            "-o",
            tmp.resolve("run-auto").toString(),
            "--model",
            "mlp:4800-8-3",
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--set",
            "ramtrain.train.threads=1");
    assertEquals(0, t.status(), t.err());
  }

  @Test
  void aStoredJpegThatDoesNotDecodeFailsTheRunByNameOrIsSkipped() throws Exception {
    Path jpeg = preprocess("jpeg");
    String shard = damageOneJpeg(jpeg);
    List<String> train =
        List.of(
            "train",
            "-d",
            jpeg.toString(),
            "--model",
            "mlp:4800-8-3",
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--set",
            "ramtrain.train.threads=1");
    MainTest.Run failed = run(concat(train, "-o", tmp.resolve("failed").toString()));
    assertEquals(Main.EXIT_FAILURE, failed.status(), failed.err());
    // One line (the progress line before it is rewritten in place) names the shard and sample.
    String error =
        failed.err().lines().filter(l -> l.contains("error:")).findFirst().orElse(failed.err());
    assertTrue(error.contains(shard), error);
    assertTrue(error.matches(".*sample -?\\d+ \\(record batch \\d+, row \\d+\\).*"), error);
    assertTrue(error.contains("does not decode: Corrupt JPEG data"), error);
    assertTrue(error.contains("bad-sample=skip"), error);

    Path runDir = tmp.resolve("skipped");
    MainTest.Run skipped =
        run(concat(train, "-o", runDir.toString(), "--set", "ramtrain.train.bad-sample=skip"));
    assertEquals(0, skipped.status(), skipped.err());
    assertTrue(RunMetrics.figure(RunMetrics.epochs(runDir).get(0), "bad_samples_skipped") > 0);

    MainTest.Run verify = run("inspect", jpeg.toString(), "--samples", "0", "--verify-all");
    assertEquals(Main.EXIT_FAILURE, verify.status(), verify.out());
    assertTrue(verify.err().contains("does not decode"), verify.err());
  }

  private static String[] concat(List<String> head, String... tail) {
    List<String> all = new java.util.ArrayList<>(head);
    all.addAll(List.of(tail));
    return all.toArray(String[]::new);
  }

  /**
   * Damages the scan of the first JPEG of the first train shard and records the shard's new
   * checksum, as a writer that stored damaged bytes would have: the checksum cannot catch it, only
   * decoding can. Returns the shard's file name.
   */
  private static String damageOneJpeg(Path dataset) throws Exception {
    Path manifestFile = dataset.resolve("manifest.json");
    ObjectNode manifest = (ObjectNode) JSON.readTree(manifestFile.toFile());
    ObjectNode entry = (ObjectNode) manifest.path("splits").path("train").path("shards").get(0);
    Path file = dataset.resolve(entry.path("file").asText());
    byte[] bytes = Files.readAllBytes(file);
    int scan = -1;
    for (int i = 0; i + 1 < bytes.length; i++) {
      if ((bytes[i] & 0xFF) == 0xFF && (bytes[i + 1] & 0xFF) == 0xDA) { // start of scan
        scan = i;
        break;
      }
    }
    assertTrue(scan > 0, "a JPEG in " + file);
    for (int i = scan + 40; i < scan + 200; i++) {
      bytes[i] = (byte) 0xFF; // markers where entropy-coded data should be
    }
    Files.write(file, bytes);
    entry.put("crc32c", String.format("%08x", ShardReader.crc32c(ByteBuffer.wrap(bytes))));
    JSON.writeValue(manifestFile.toFile(), manifest);
    return file.getFileName().toString();
  }
}
