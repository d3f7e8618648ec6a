package dev.ramtrain.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

class SparkSessionsTest {
  private static final String INTERVAL = "spark.scheduler.barrier.maxConcurrentTasksCheck.interval";
  private static final String FAILURES =
      "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures";

  /** What the user or spark-submit set is kept; ramtrain fills in only what they left unset. */
  @Test
  void theUsersSettingsWinOverRamtrainsDefaults() {
    SparkConf set =
        new SparkConf(false)
            .set("spark.executor.heartbeatInterval", "7s")
            .set(INTERVAL, "30s")
            .set(FAILURES, "3");
    Map<String, String> chosen = SparkSessions.defaults(set);
    assertFalse(chosen.containsKey("spark.executor.heartbeatInterval"), chosen.toString());
    assertFalse(chosen.containsKey(INTERVAL), chosen.toString());
    assertFalse(chosen.containsKey(FAILURES), chosen.toString());
    assertEquals("false", chosen.get("spark.ui.showConsoleProgress"));
  }

  /**
   * A barrier stage whose executors have not registered yet is checked again sooner than Spark's 15
   * s, and Spark's patience is kept: the checks together wait at least its 40 × 15 s.
   */
  @Test
  void aBarrierStageIsCheckedSoonerAndWaitedForAsLong() {
    SparkConf spark = new SparkConf(false);
    SparkConf defaults = new SparkConf(false);
    SparkSessions.defaults(spark).forEach(defaults::set);
    long interval = defaults.getTimeAsSeconds(INTERVAL);
    long checks = defaults.getInt(FAILURES, 0);
    long sparkInterval = spark.getTimeAsSeconds(INTERVAL, "15s");
    long sparkChecks = spark.getInt(FAILURES, 40);
    assertTrue(interval < sparkInterval, "checked every " + interval + " s");
    assertTrue(
        interval * checks >= sparkInterval * sparkChecks,
        interval * checks + " s of checks against Spark's " + sparkInterval * sparkChecks);
  }
}
