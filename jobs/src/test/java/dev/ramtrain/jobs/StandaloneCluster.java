package dev.ramtrain.jobs;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * A real Spark standalone cluster on 127.0.0.1 for the tests: a Master and Workers of one core
 * each, every Worker with its own work directory, started from a SPARK_HOME whose jars are a stock
 * Spark's: Spark's own modules and their dependencies as Spark's poms resolve them
 * (jobs/spark-dist), nothing of ramtrain's, so the job sees what a user's cluster shows it (no
 * Spark distribution is needed: Spark's launcher library builds every command, given {@code
 * SPARK_SCALA_VERSION} where a distribution's build folders are missing). Close to stop everything
 * it started, the executors included.
 */
final class StandaloneCluster implements AutoCloseable {
  private static final Duration START_TIMEOUT = Duration.ofSeconds(90);

  private final Path home;
  private final Path logs;
  private final int masterPort;
  private final Process master;
  private final List<Process> workers = new ArrayList<>();
  private final List<Path> workDirs = new ArrayList<>();

  private StandaloneCluster(Path home, Path logs, int masterPort, Process master) {
    this.home = home;
    this.logs = logs;
    this.masterPort = masterPort;
    this.master = master;
  }

  /**
   * Assembles SPARK_HOME under {@code dir} from the build in {@code root} (jobs/spark-dist's
   * classpath) and starts a Master and {@code workers} Workers.
   */
  static StandaloneCluster start(Path dir, Path root, int workers) throws Exception {
    Path home = assembleSparkHome(dir.resolve("spark-home"), root);
    Path logs = Files.createDirectories(dir.resolve("logs"));
    Path gpus = gpuDiscoveryScript(dir);
    int port = freePort();
    Process master =
        daemon(
            home,
            logs.resolve("master.log"),
            List.of(),
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            Integer.toString(port),
            "--webui-port",
            Integer.toString(freePort()));
    StandaloneCluster cluster = new StandaloneCluster(home, logs, port, master);
    cluster.gpuScript = gpus;
    cluster.classArchive = dir.resolve("spark-classes.jsa");
    try {
      cluster.awaitLog(logs.resolve("master.log"), "ALIVE", 1);
      for (int w = 0; w < workers; w++) {
        Path work = Files.createDirectories(dir.resolve("worker-" + w));
        cluster.workDirs.add(work);
        cluster.workers.add(
            daemon(
                home,
                logs.resolve("worker-" + w + ".log"),
                List.of(
                    "-Dspark.worker.resource.gpu.amount=" + GPUS_PER_WORKER,
                    "-Dspark.worker.resource.gpu.discoveryScript=" + gpus),
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "2g",
                "--work-dir",
                work.toString(),
                "--webui-port",
                Integer.toString(freePort()),
                cluster.masterUrl()));
      }
      cluster.awaitLog(logs.resolve("master.log"), "Registering worker", workers);
      return cluster;
    } catch (Exception | Error e) {
      cluster.close();
      throw e;
    }
  }

  /**
   * The GPUs each Worker offers, as its discovery script ({@link #gpuDiscoveryScript}) reports
   * them: an application asks for them with {@link #gpuConf}; the cpu backend's device instances
   * stand in for them.
   */
  static final int GPUS_PER_WORKER = 2;

  private Path gpuScript;

  /**
   * A GPU discovery script of the tests' own (Spark's resource discovery protocol: one JSON line
   * naming the resource and its addresses), offering {@link #GPUS_PER_WORKER} GPUs.
   */
  private static Path gpuDiscoveryScript(Path dir) throws IOException {
    Path script = Files.createDirectories(dir).resolve("gpus.sh");
    StringBuilder addresses = new StringBuilder();
    for (int g = 0; g < GPUS_PER_WORKER; g++) {
      addresses.append(g == 0 ? "" : ", ").append('"').append(g).append('"');
    }
    Files.writeString(
        script, "#!/bin/sh\necho '{\"name\": \"gpu\", \"addresses\": [" + addresses + "]}'\n");
    if (!script.toFile().setExecutable(true)) {
      throw new IOException("cannot make " + script + " executable");
    }
    return script;
  }

  private Path classArchive;
  private boolean archiving;

  /**
   * Class data sharing for the applications' JVMs, whose drivers and executors load Spark's classes
   * from SPARK_HOME's jars alone: the first application's driver writes an archive of the classes
   * it loaded as it exits ({@link #applicationEnded}), and the drivers and executors of the
   * applications after it map them instead of reading and verifying them from the jars again (a JVM
   * that cannot use the archive starts without it). The spark-submit settings for the next
   * application.
   */
  List<String> classArchiveConf() {
    String quiet = " -Xlog:cds=off -Xlog:cds+dynamic=off";
    if (Files.exists(classArchive)) {
      String use = "-XX:SharedArchiveFile=" + classArchive + quiet;
      return List.of(
          "--conf",
          "spark.driver.extraJavaOptions=" + use,
          "--conf",
          "spark.executor.extraJavaOptions=" + use);
    }
    if (archiving) {
      return List.of(); // the first driver wrote none: the applications start without one
    }
    archiving = true;
    return List.of(
        "--conf",
        "spark.driver.extraJavaOptions=-XX:ArchiveClassesAtExit=" + partialArchive() + quiet);
  }

  /** After an application's driver has exited: the archive it wrote, once whole, is used. */
  void applicationEnded() throws IOException {
    Path partial = partialArchive();
    if (Files.exists(partial)) { // only the first application's driver writes one
      if (Files.size(partial) > 0) {
        Files.move(partial, classArchive);
      } else {
        Files.delete(partial);
      }
    }
  }

  private Path partialArchive() {
    return classArchive.resolveSibling(classArchive.getFileName() + ".partial");
  }

  /** The spark-submit settings of an application whose executors take a Worker's GPUs. */
  List<String> gpuConf() {
    return List.of(
        "--conf",
        "spark.executor.resource.gpu.amount=" + GPUS_PER_WORKER,
        "--conf",
        "spark.executor.resource.gpu.discoveryScript=" + gpuScript,
        // addresses numbered as nvidia-smi does, which CUDA follows in this order only
        "--conf",
        "spark.executorEnv.CUDA_DEVICE_ORDER=PCI_BUS_ID");
  }

  String masterUrl() {
    return "spark://127.0.0.1:" + masterPort;
  }

  Path sparkHome() {
    return home;
  }

  /** The work directory of worker {@code w}: its executors' stdout and stderr, per application. */
  Path workDir(int w) {
    return workDirs.get(w);
  }

  /** The environment a driver (bin/ramtrain, spark-submit) needs to reach this cluster. */
  Map<String, String> clientEnvironment() {
    return daemonEnvironment(home);
  }

  /** Worker {@code w}'s running executor processes (Spark's CoarseGrainedExecutorBackend). */
  List<ProcessHandle> executors(int w) {
    return workers
        .get(w)
        .descendants()
        .filter(
            p ->
                p.info()
                    .arguments()
                    .map(a -> String.join(" ", a).contains("CoarseGrainedExecutorBackend"))
                    .orElse(false))
        .toList();
  }

  /** The application folders in the workers' work directories (one per application and worker). */
  Set<Path> applications() throws IOException {
    Set<Path> apps = new HashSet<>();
    for (Path work : workDirs) {
      try (Stream<Path> entries = Files.list(work)) {
        entries.filter(p -> p.getFileName().toString().startsWith("app-")).forEach(apps::add);
      }
    }
    return apps;
  }

  /**
   * What the executors of the applications started since {@code before} ({@link #applications})
   * printed to stdout so far, each file under a header naming it.
   */
  String executorStdout(Set<Path> before) throws IOException {
    StringBuilder out = new StringBuilder();
    for (Path app : applications()) {
      if (before.contains(app)) {
        continue;
      }
      try (Stream<Path> files = Files.walk(app)) {
        for (Path f : files.filter(p -> p.getFileName().toString().equals("stdout")).toList()) {
          out.append("== ").append(f).append('\n');
          out.append(Files.readString(f, StandardCharsets.UTF_8));
        }
      }
    }
    return out.toString();
  }

  /** What the drivers run on the workers (--deploy-mode cluster) printed to stdout so far. */
  String driverStdout() throws IOException {
    StringBuilder out = new StringBuilder();
    for (Path work : workDirs) {
      try (Stream<Path> entries = Files.list(work)) {
        for (Path driver :
            entries.filter(p -> p.getFileName().toString().startsWith("driver-")).toList()) {
          Path stdout = driver.resolve("stdout");
          if (Files.exists(stdout)) {
            out.append(Files.readString(stdout, StandardCharsets.UTF_8));
          }
        }
      }
    }
    return out.toString();
  }

  @Override
  public void close() {
    List<Process> all = new ArrayList<>(workers);
    all.add(master);
    for (Process p : all) {
      p.descendants().forEach(ProcessHandle::destroyForcibly);
      p.destroyForcibly();
    }
    for (Process p : all) {
      try {
        p.waitFor();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    // The links this class made to the Maven repository's jars (JUnit warns of each it meets).
    try (Stream<Path> jars = Files.list(home.resolve("jars"))) {
      for (Path link : jars.filter(Files::isSymbolicLink).toList()) {
        Files.delete(link);
      }
    } catch (IOException e) {
      // the temporary folder's cleanup removes them then
    }
  }

  /**
   * SPARK_HOME with {@code jars/}: Spark's modules and their dependencies, as a Spark distribution
   * has them (the Spark this build compiles against, checked); and {@code bin/spark-submit}.
   */
  private static Path assembleSparkHome(Path home, Path root) throws IOException {
    Path classpath = root.resolve("jobs/spark-dist/target/spark-dist.classpath");
    if (!Files.exists(classpath)) {
      throw new IllegalStateException(classpath + " is missing: build jobs/spark-dist first");
    }
    Path jars = Files.createDirectories(home.resolve("jars"));
    Files.createDirectories(home.resolve("conf"));
    String core = "spark-core_2.13-" + org.apache.spark.package$.MODULE$.SPARK_VERSION() + ".jar";
    boolean sameSpark = false;
    for (String entry : Files.readString(classpath).split(":")) {
      Path jar = Path.of(entry.strip());
      if (jar.startsWith(root)) {
        throw new IllegalStateException(classpath + " names a jar of this build: " + jar);
      }
      sameSpark |= jar.getFileName().toString().equals(core);
      Files.createSymbolicLink(jars.resolve(jar.getFileName()), jar);
    }
    if (!sameSpark) {
      throw new IllegalStateException(
          classpath + " holds no " + core + ": jobs/spark-dist's spark.version is not the build's");
    }
    Path bin = Files.createDirectories(home.resolve("bin"));
    Path submit = bin.resolve("spark-submit");
    // What a distribution's bin/spark-submit does: Spark's launcher library builds the driver's
    // command (classpath, driver JVM options and memory) and prints it, a NUL before it and one
    // after each word; the script runs it.
    Files.writeString(
        submit,
        String.join(
            "\n",
            "#!/usr/bin/env bash",
            "set -euo pipefail",
            "words=()",
            "seen_marker=0",
            "while IFS= read -r -d '' part; do",
            "  if ((seen_marker)); then words+=(\"${part#$'\\n'}\"); else seen_marker=1;"
                + " printf '%s' \"$part\"; fi",
            "done < <(\"$JAVA_HOME/bin/java\" -cp \"$SPARK_HOME/jars/*\""
                + " org.apache.spark.launcher.Main org.apache.spark.deploy.SparkSubmit \"$@\")",
            "((${#words[@]})) || { echo 'spark-submit: the launcher built no command' >&2; exit 1; }",
            "exec \"${words[@]}\"",
            ""));
    if (!submit.toFile().setExecutable(true)) {
      throw new IOException("cannot make " + submit + " executable");
    }
    return home;
  }

  private static Map<String, String> daemonEnvironment(Path home) {
    return Map.of(
        "SPARK_HOME", home.toString(),
        "SPARK_SCALA_VERSION", "2.13",
        "SPARK_LOCAL_IP", "127.0.0.1",
        "SPARK_CONF_DIR", home.resolve("conf").toString(),
        "JAVA_HOME", System.getProperty("java.home"));
  }

  private static Process daemon(
      Path home, Path log, List<String> properties, String mainClass, String... args)
      throws IOException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(List.of(System.getProperty("ramtrain.jvm.flags", "").split("\\s+")));
    command.addAll(properties);
    command.addAll(List.of("-Xmx512m", "-cp", home.resolve("jars") + "/*", mainClass));
    command.addAll(List.of(args));
    ProcessBuilder pb =
        new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
    pb.environment().putAll(daemonEnvironment(home));
    return pb.start();
  }

  /** Waits until {@code log} has {@code count} lines containing {@code text}. */
  private void awaitLog(Path log, String text, int count) throws Exception {
    Instant deadline = Instant.now().plus(START_TIMEOUT);
    while (Instant.now().isBefore(deadline)) {
      if (Files.exists(log)
          && Files.readAllLines(log).stream().filter(l -> l.contains(text)).count() >= count) {
        return;
      }
      Optional<Process> dead =
          Stream.concat(workers.stream(), Stream.of(master)).filter(p -> !p.isAlive()).findFirst();
      if (dead.isPresent()) {
        throw new IllegalStateException(
            "a cluster process exited (" + dead.get().exitValue() + "); logs in " + logs);
      }
      Thread.sleep(200);
    }
    throw new IllegalStateException(
        "no '" + text + "' x" + count + " in " + log + " within " + START_TIMEOUT);
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }
}
