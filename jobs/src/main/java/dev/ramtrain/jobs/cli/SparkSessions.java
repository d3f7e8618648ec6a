package dev.ramtrain.jobs.cli;

import dev.ramtrain.settings.ConfigException;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;

/** Builds the Spark session: the master spark-submit gave, or embedded local[*] by default. */
public final class SparkSessions {
  private static final Pattern LOCAL = Pattern.compile("local\\[(\\d+)(?:,\\s*\\d+)?\\]");
  private static final Pattern LOCAL_CLUSTER = Pattern.compile("local-cluster\\[.*\\]");

  private SparkSessions() {}

  /**
   * The master a command runs on: {@code given} (--master), else spark-submit's ({@code
   * spark.master}, which bin/ramtrain's --master and cluster mode pass that way); null when the
   * command runs embedded by default.
   */
  public static String master(String given) {
    if (given != null) {
      return given;
    }
    SparkConf conf = new SparkConf(true);
    return conf.contains("spark.master") ? conf.get("spark.master") : null;
  }

  public static SparkSession open(String appName, String master) {
    SparkConf conf = new SparkConf(true);
    requireLocalThreads(master != null ? master : conf.get("spark.master", "local[*]"));
    SparkSession.Builder builder = SparkSession.builder().appName(appName);
    if (master != null) {
      builder.master(master);
    } else if (!conf.contains("spark.master")) {
      builder.master("local[*]");
    }
    defaults(conf).forEach(builder::config);
    return builder.getOrCreate();
  }

  /**
   * ramtrain's own defaults for Spark's settings that {@code conf} (spark-submit's, the user's)
   * leaves unset, in the order they are listed.
   */
  static Map<String, String> defaults(SparkConf conf) {
    Map<String, String> chosen = new LinkedHashMap<>();
    DEFAULTS.forEach(
        (key, value) -> {
          if (!conf.contains(key)) {
            chosen.put(key, value);
          }
        });
    return chosen;
  }

  private static final Map<String, String> DEFAULTS = defaultsTable();

  private static Map<String, String> defaultsTable() {
    Map<String, String> table = new LinkedHashMap<>();
    table.put("spark.ui.showConsoleProgress", "false"); // ramtrain draws its own line
    // Running tasks' accumulator values reach the driver with the heartbeats: ramtrain's
    // progress line moves every 2 s instead of every 10 s (Spark's default) or per task.
    table.put("spark.executor.heartbeatInterval", "2s");
    // A barrier stage (the trainer's) submitted before its executors have registered is checked
    // again every 15 s by default: a `train --ranks N` on a cluster whose executors came 3 s after
    // the driver waited 12 s more. Checked every second instead, 600 times: 10 minutes in all,
    // as Spark's 40 checks of 15 s.
    table.put("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s");
    table.put("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "600");
    return Collections.unmodifiableMap(table);
  }

  /**
   * local[N]: Spark starts a thread per task slot; a mistyped N (local[999999]) ran the machine out
   * of native threads with a stack trace. More than 8 per core (at least 64) is refused, and so is
   * local-cluster[...].
   */
  static void requireLocalThreads(String master) {
    if (LOCAL_CLUSTER.matcher(master.strip()).matches()) {
      // Spark's own test mode: it launches worker JVMs through SPARK_HOME's scripts, which a
      // ramtrain install does not have, and failed as "Cannot call methods on a stopped
      // SparkContext" (and local-cluster[999999,1,1024] asked for that many workers).
      throw new ConfigException(
          "--master "
              + master
              + ": local-cluster is Spark's test-only mode; use local[N] for N task slots in"
              + " this process, or a standalone master spark://HOST:7077 for separate executors");
    }
    Matcher m = LOCAL.matcher(master.strip());
    if (!m.matches()) {
      return;
    }
    int cores = Runtime.getRuntime().availableProcessors();
    long most = Math.max(64, 8L * cores);
    if (m.group(1).length() > 9 || Long.parseLong(m.group(1)) > most) {
      throw new ConfigException(
          String.format(
              "--master %s: %s task threads on a machine of %d cores; at most %d (or local[*])",
              master, m.group(1), cores, most));
    }
  }
}
