package dev.ramtrain.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.dataset.Dataset;
import dev.ramtrain.etl.shard.Manifest;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** bin/ramtrain as a user runs it, in a separate process, after the build made its jars. */
class LauncherIT {
  private static final Path ROOT = Path.of(System.getProperty("ramtrain.repo.root"));
  @TempDir Path tmp;

  record Result(int status, String output) {}

  private static Result launch(Map<String, String> env, String... args)
      throws IOException, InterruptedException {
    List<String> command = new ArrayList<>(List.of(ROOT.resolve("bin/ramtrain").toString()));
    command.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
    pb.environment().remove("SPARK_HOME");
    pb.environment().putAll(env);
    Process p = pb.start();
    byte[] out = p.getInputStream().readAllBytes();
    assertTrue(p.waitFor(5, TimeUnit.MINUTES), "launcher finished");
    return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8));
  }

  @Test
  void demoRunsEndToEnd() throws Exception {
    Path work = tmp.resolve("demo");
    Result r =
        launch(
            Map.of(),
            "demo",
            "--workdir",
            work.toString(),
            "--images-per-class",
            "12",
            "--size",
            "24");
    assertEquals(0, r.status(), r.output());
    assertTrue(r.output().contains("[3/3] inspect"), r.output());
    Manifest m = Dataset.open(work.resolve("dataset").toString(), new Configuration()).manifest();
    assertEquals(
        72, m.split(Manifest.TRAIN).rows() + m.split(Manifest.VAL).rows(), "6 classes x 12");
    assertEquals(24, m.image().height());
    assertTrue(Files.size(work.resolve("samples.png")) > 1000);

    Result again =
        launch(
            Map.of(),
            "demo",
            "--workdir",
            work.toString(),
            "--images-per-class",
            "12",
            "--size",
            "24");
    assertEquals(0, again.status(), "the demo can be re-run in place: " + again.output());
  }

  @Test
  void badSettingsAndMissingSparkHomeExitNonZeroWithAMessage() throws Exception {
    Result r =
        launch(
            Map.of(),
            "preprocess",
            "-i",
            tmp.toString(),
            "-o",
            tmp.resolve("o").toString(),
            "--set",
            "ramtrain.etl.heigth=3");
    assertEquals(2, r.status(), r.output());
    assertTrue(r.output().contains("unknown configuration key ramtrain.etl.heigth"), r.output());

    r = launch(Map.of(), "demo", "--master", "spark://nowhere:7077");
    assertEquals(2, r.status(), r.output());
    assertTrue(r.output().contains("SPARK_HOME"), r.output());
  }
}
