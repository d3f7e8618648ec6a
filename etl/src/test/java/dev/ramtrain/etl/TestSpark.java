package dev.ramtrain.etl;

import org.apache.spark.sql.SparkSession;

/** One local Spark session per test JVM: starting Spark costs seconds, tests share it. */
public final class TestSpark {
  private static SparkSession session;

  private TestSpark() {}

  public static synchronized SparkSession session() {
    if (session == null) {
      session =
          SparkSession.builder()
              .master("local[2]")
              .appName("ramtrain-tests")
              .config("spark.ui.enabled", "false")
              .config("spark.sql.shuffle.partitions", "4")
              .config("spark.executor.heartbeatInterval", "500ms") // as fast as progress tests need
              .getOrCreate();
    }
    return session;
  }
}
