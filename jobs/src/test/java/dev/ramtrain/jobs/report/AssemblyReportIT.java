package dev.ramtrain.jobs.report;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The report drawn by the assembly jar on the class path a stock Spark gives it (Spark's own jars,
 * jobs/spark-dist), nothing of the build's: what spark-submit runs on a cluster. The shading drops
 * the libraries' build metadata (META-INF/maven), which the report must not need.
 */
class AssemblyReportIT {
  private static final Path ROOT = Path.of(System.getProperty("ramtrain.repo.root"));

  @TempDir Path tmp;

  @Test
  void theAssemblyJarDrawsTheReportWithSparksJarsAlone() throws Exception {
    Path run = RunFixture.write(tmp.resolve("run"), 2, 0.01, false);
    Path assembly;
    try (Stream<Path> jars = Files.list(ROOT.resolve("jobs/target"))) {
      assembly =
          jars.filter(p -> p.getFileName().toString().endsWith("-assembly.jar"))
              .findFirst()
              .orElseThrow();
    }
    String spark =
        Files.readString(ROOT.resolve("jobs/spark-dist/target/spark-dist.classpath")).strip();
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(List.of(System.getProperty("ramtrain.jvm.flags", "").split("\\s+")));
    command.removeIf(String::isEmpty);
    command.addAll(
        List.of("-cp", assembly + ":" + spark, "dev.ramtrain.jobs.Main", "report", run.toString()));
    Path log = tmp.resolve("report.log");
    Process p =
        new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    assertTrue(p.waitFor(2, TimeUnit.MINUTES), "report finished");
    String output = Files.readString(log, StandardCharsets.UTF_8);
    assertEquals(0, p.exitValue(), output);
    String page = Files.readString(run.resolve("report/index.html"), StandardCharsets.UTF_8);
    assertTrue(page.contains("uPlot"), "uPlot inlined");
    assertTrue(Files.exists(run.resolve("report/loss.png")), output);
  }
}
