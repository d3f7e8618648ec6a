package dev.ramtrain.jobs.cli;

import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.settings.ConfigException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import picocli.CommandLine.Option;
import scala.Tuple2;

/** Options every command takes: a config file, generic key overrides, and the Spark master. */
public final class CommonFlags {
  @Option(
      names = "--config",
      paramLabel = "FILE",
      description = "User config file (HOCON) overriding conf/ramtrain-defaults.conf.")
  Path configFile;

  @Option(
      names = "--set",
      paramLabel = "KEY=VALUE",
      description =
          "Set any key, e.g. --set ramtrain.etl.height=128 (repeatable; beats everything else).")
  List<String> sets = List.of();

  @Option(
      names = "--master",
      paramLabel = "URL",
      description =
          "Spark master. bin/ramtrain runs spark-submit when it is given; default local[*].")
  String master;

  /** Loads the configuration with {@code flags} (full key to text) on top of --set values. */
  public RamtrainConfig load(Map<String, String> flags) {
    Map<String, String> cli = new LinkedHashMap<>();
    flags.forEach(
        (k, v) -> {
          if (v != null) {
            cli.put(k, v);
          }
        });
    for (String set : sets) {
      int eq = set.indexOf('=');
      if (eq <= 0) {
        throw new ConfigException("--set " + set + ": expected KEY=VALUE");
      }
      String key = set.substring(0, eq).strip();
      if (!key.startsWith(RamtrainConfig.ROOT + ".")) { // was ignored without a word
        throw new ConfigException(
            "--set "
                + set
                + ": not a ramtrain setting (their keys start with "
                + RamtrainConfig.ROOT
                + ".; conf/ramtrain-defaults.conf lists them); Spark's go to spark-submit's"
                + " --conf");
      }
      cli.put(key, set.substring(eq + 1).strip());
    }
    Map<String, String> spark = new LinkedHashMap<>();
    for (Tuple2<String, String> entry : new SparkConf(true).getAll()) {
      spark.put(entry._1(), entry._2());
    }
    return RamtrainConfig.load(configFile, spark, cli);
  }

  public String master() {
    return master;
  }

  static String text(Object value) {
    return value == null ? null : value.toString();
  }
}
