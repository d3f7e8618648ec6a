package dev.ramtrain.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** bin/ramtrain as a user runs it, in a separate process, after the build made its jars. */
class LauncherIT {
  private static final Path ROOT = Path.of(System.getProperty("ramtrain.repo.root"));
  @TempDir Path tmp;

  record Result(int status, String output) {}

  static Result launch(Map<String, String> env, String... args)
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
    String[] demo = {
      "demo",
      "--workdir",
      work.toString(),
      "--images-per-class",
      "20",
      "--size",
      "24",
      "--epochs",
      "2",
      "--set",
      "ramtrain.train.batch-size=16"
    };
    Result r = launch(Map.of(), demo);
    assertEquals(0, r.status(), r.output());
    assertTrue(r.output().contains("[4/4] report"), r.output());
    assertTrue(r.output().contains("in a Spark barrier stage"), r.output());
    assertTrue(r.output().contains("on in-memory shards:"), r.output());
    assertTrue(r.output().contains("1 rank read "), r.output());
    assertTrue(r.output().contains("0.0 MB of it over the network"), r.output());
    Matcher accuracy =
        Pattern.compile("val accuracy (\\d\\.\\d+) over (\\d+) samples").matcher(r.output());
    assertTrue(accuracy.find(), r.output());
    assertTrue(Integer.parseInt(accuracy.group(2)) > 0, "the val split was evaluated");
    assertTrue(Files.size(work.resolve("run/report/loss.png")) > 1000);
    assertTrue(Files.exists(work.resolve("run/report/index.html")));
    assertEquals("epoch-0002", Files.readString(work.resolve("run/checkpoints/latest")).strip());
    assertEquals(
        2,
        Files.readAllLines(work.resolve("run/metrics.jsonl")).stream()
            .filter(l -> l.contains("\"type\":\"epoch\""))
            .count());
    assertTrue(
        !Files.exists(work.resolve("dataset")), "in-memory shards: no dataset directory written");

    Result again = launch(Map.of(), demo);
    assertEquals(0, again.status(), "the demo can be re-run in place: " + again.output());
  }

  /**
   * With a master, spark-submit gets its own options as given and ramtrain's JVM flags appended to
   * what the cluster already sets (spark-defaults.conf), and the driver logs as embedded runs do. A
   * stand-in spark-submit records its arguments, one per line.
   */
  @Test
  void sparkSubmitOptionsPassThroughAndClusterJavaOptionsAreKept() throws Exception {
    Path spark = tmp.resolve("spark");
    Path recorded = tmp.resolve("submitted.txt");
    recordingSparkSubmit(spark, recorded);
    Files.createDirectories(spark.resolve("conf"));
    Files.writeString(
        spark.resolve("conf/spark-defaults.conf"),
        "spark.executor.extraJavaOptions  -XX:+UseG1GC -Dcluster.own=1\n");

    Result r =
        launch(
            Map.of("SPARK_HOME", spark.toString()),
            "inspect",
            "some-dataset",
            "--master",
            "spark://head:7077",
            "--conf",
            "spark.executor.memory=2g",
            "--executor-memory",
            "3g",
            "--num-executors",
            "4",
            "--deploy-mode",
            "client");
    assertEquals(0, r.status(), r.output());
    List<String> args = Files.readAllLines(recorded);
    String joined = String.join("\n", args);
    assertTrue(joined.contains("--master\nspark://head:7077"), joined);
    assertTrue(joined.contains("--deploy-mode\nclient"), joined);
    assertTrue(joined.contains("--conf\nspark.executor.memory=2g"), joined);
    assertTrue(joined.contains("--executor-memory\n3g"), joined);
    assertTrue(joined.contains("--num-executors\n4"), joined);
    String executor =
        args.stream()
            .filter(a -> a.startsWith("spark.executor.extraJavaOptions="))
            .findFirst()
            .orElseThrow();
    assertTrue(
        executor.startsWith(
            "spark.executor.extraJavaOptions=-XX:+UseG1GC -Dcluster.own=1 --add-opens"),
        executor);
    String driver =
        args.stream()
            .filter(a -> a.startsWith("spark.driver.extraJavaOptions="))
            .findFirst()
            .orElseThrow();
    assertTrue(
        driver.contains("--add-opens") && driver.contains("-Dlog4j2.configurationFile="), driver);
    // The application and its own arguments come last, after every spark-submit option.
    assertEquals(List.of("inspect", "some-dataset"), args.subList(args.size() - 2, args.size()));
    assertTrue(args.get(args.size() - 3).endsWith("-assembly.jar"), joined);
  }

  /**
   * A stand-in SPARK_HOME whose spark-submit writes its arguments to {@code recorded}, a line each.
   */
  private static void recordingSparkSubmit(Path sparkHome, Path recorded) throws IOException {
    Files.createDirectories(sparkHome.resolve("bin"));
    Path submit = sparkHome.resolve("bin/spark-submit");
    Files.writeString(
        submit,
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"" + recorded + "\"\n");
    assertTrue(submit.toFile().setExecutable(true));
  }

  /**
   * oneDNN's OpenMP threads follow ramtrain.train.threads on the executors (Spark would give them
   * spark.task.cpus), else spark.executor.cores; a value the user gives is kept.
   */
  @Test
  void executorsGetTheOpenMpThreadsOfTheTrainerThreads() throws Exception {
    Path spark = tmp.resolve("spark-omp");
    Path recorded = tmp.resolve("submitted-omp.txt");
    recordingSparkSubmit(spark, recorded);
    Map<String, String> env = Map.of("SPARK_HOME", spark.toString());
    String master = "spark://head:7077";

    launch(env, "inspect", "ds", "--master", master, "--set", "ramtrain.train.threads=3");
    assertTrue(
        Files.readAllLines(recorded).contains("spark.executorEnv.OMP_NUM_THREADS=3"),
        Files.readString(recorded));
    launch(env, "inspect", "ds", "--master", master, "--conf", "spark.executor.cores=4");
    assertTrue(
        Files.readAllLines(recorded).contains("spark.executorEnv.OMP_NUM_THREADS=4"),
        Files.readString(recorded));
    launch(
        env,
        "inspect",
        "ds",
        "--master",
        master,
        "--set",
        "ramtrain.train.threads=3",
        "--conf",
        "spark.executorEnv.OMP_NUM_THREADS=2");
    List<String> kept = Files.readAllLines(recorded);
    assertTrue(kept.contains("spark.executorEnv.OMP_NUM_THREADS=2"), String.join("\n", kept));
    assertFalse(kept.contains("spark.executorEnv.OMP_NUM_THREADS=3"), String.join("\n", kept));
  }

  /**
   * The launcher keeps the options it handles for spark-submit; none may be a name some command
   * uses for its own (as {@code -c} once was: evaluate's and predict's checkpoint), or that
   * command's flag never arrives. {@code --master} is both, on purpose: the launcher passes it on.
   */
  @Test
  void theLauncherTakesNoOptionACommandOwns() throws Exception {
    String script = Files.readString(ROOT.resolve("bin/ramtrain"));
    String arguments = script.substring(script.indexOf("case \"$1\" in"), script.indexOf("esac"));
    Set<String> launcher = new TreeSet<>();
    Matcher label =
        Pattern.compile("(?m)^\\s*(-[^)\\n]*)\\)").matcher(arguments.replace("\\\n", " "));
    while (label.find()) {
      for (String name : label.group(1).split("\\|")) {
        launcher.add(name.strip().replace("=*", ""));
      }
    }
    assertTrue(launcher.containsAll(List.of("--conf", "--driver-memory", "--jars")), "" + launcher);
    Set<String> clash = new TreeSet<>();
    CommandLine cli = new CommandLine(new dev.ramtrain.jobs.Main());
    for (CommandLine command : cli.getSubcommands().values()) {
      for (var option : command.getCommandSpec().options()) {
        for (String name : option.names()) {
          if (launcher.contains(name) && !name.equals("--master")) {
            clash.add(command.getCommandName() + " " + name);
          }
        }
      }
    }
    assertEquals(Set.of(), clash, "options bin/ramtrain would take from the command");
  }

  /** The class archives beside the jars (one per JVM), by name. */
  private static List<Path> classArchives() throws IOException {
    try (var files = Files.list(ROOT.resolve("jobs/target"))) {
      return files
          .filter(f -> f.getFileName().toString().matches("ramtrain-classes-\\d+\\.jsa"))
          .toList();
    }
  }

  /**
   * Embedded, bin/ramtrain starts the JVM over a class archive that it makes once beside the jars,
   * silently (a command's output is its own), and makes again once a jar is newer than it; with
   * RAMTRAIN_CDS=off it neither uses nor makes one.
   */
  @Test
  void theClassArchiveIsMadeOnceBesideTheJarsAndAgainWhenAJarChanges() throws Exception {
    Result first = launch(Map.of(), "--version");
    assertEquals(0, first.status(), first.output());
    assertEquals(1, first.output().strip().lines().count(), "nothing but the version: " + first);
    List<Path> archives = classArchives();
    assertEquals(1, archives.size(), archives.toString());
    Path archive = archives.get(0);
    var made = Files.getLastModifiedTime(archive);
    assertEquals(0, launch(Map.of(), "--version").status());
    assertEquals(made, Files.getLastModifiedTime(archive), "kept while the jars are older");

    Path jar =
        Files.list(ROOT.resolve("jobs/target"))
            .filter(f -> f.getFileName().toString().matches("ramtrain-jobs-.*-SNAPSHOT\\.jar"))
            .findFirst()
            .orElseThrow();
    Files.setLastModifiedTime(
        jar, java.nio.file.attribute.FileTime.fromMillis(made.toMillis() + 2000));
    Result again = launch(Map.of(), "--version");
    assertEquals(0, again.status(), again.output());
    assertTrue(again.output().startsWith("ramtrain "), again.output());
    assertTrue(
        Files.getLastModifiedTime(archive).compareTo(Files.getLastModifiedTime(jar)) > 0,
        "made again after the jar changed");
    assertEquals(List.of(archive), classArchives());

    var dumped = Files.getLastModifiedTime(jar); // the archive holds the jar's time it was made at
    Files.setLastModifiedTime(
        jar,
        java.nio.file.attribute.FileTime.fromMillis(
            Files.getLastModifiedTime(archive).toMillis() + 2000));
    var kept = Files.getLastModifiedTime(archive);
    assertEquals(0, launch(Map.of("RAMTRAIN_CDS", "off"), "--version").status());
    assertEquals(kept, Files.getLastModifiedTime(archive), "off: not made");
    // The jar as the archive was made over, so that the launches after this test map it (a JVM
    // refuses an archive whose jars' times differ from those it recorded).
    Files.setLastModifiedTime(jar, dumped);
    assertEquals(0, launch(Map.of(), "--version").status());
    assertEquals(kept, Files.getLastModifiedTime(archive), "kept: the jar is older again");
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
