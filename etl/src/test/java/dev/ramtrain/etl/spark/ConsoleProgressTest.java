package dev.ramtrain.etl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.TestSpark;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.Test;

/**
 * The progress line counts files of tasks still running (from executor heartbeats), not only of
 * finished tasks: with two tasks each holding after 3 files, it reaches 6 of 10 before any ends.
 */
class ConsoleProgressTest {
  /** Holds the tasks (local mode: the same JVM) until the test has seen the partial counts. */
  static final CountDownLatch RELEASE = new CountDownLatch(1);

  @Test
  void runningTasksFilesAreCountedBeforeTheTasksEnd() throws Exception {
    SparkContext sc = TestSpark.session().sparkContext();
    LongAccumulator files = sc.longAccumulator("test files");
    LongAccumulator bytes = sc.longAccumulator("test bytes");
    try (ConsoleProgress progress =
        ConsoleProgress.start("test", 10, files, bytes, sc, System.nanoTime())) {
      Future<?> job =
          new JavaSparkContext(sc)
              .parallelize(List.of(1, 2), 2)
              .foreachPartitionAsync(
                  rows -> {
                    for (int i = 0; i < 3; i++) {
                      files.add(1);
                      bytes.add(1000);
                    }
                    RELEASE.await(60, TimeUnit.SECONDS);
                  });
      String seen = progress.text();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (!seen.startsWith("test 6/10 files") && System.nanoTime() < deadline) {
        Thread.sleep(100);
        seen = progress.text();
      }
      assertEquals(0, files.value(), "no task has ended");
      assertTrue(seen.startsWith("test 6/10 files"), seen);
      RELEASE.countDown();
      job.get(60, TimeUnit.SECONDS);
      assertTrue(
          progress.text().startsWith("test 6/10 files"), "after the end: " + progress.text());
    } finally {
      RELEASE.countDown();
    }
  }

  /** The line's clock is the run's: its rate and ETA count from when the run's figures do. */
  @Test
  void rateAndEtaCountFromTheRunsStart() throws Exception {
    SparkContext sc = TestSpark.session().sparkContext();
    LongAccumulator files = sc.longAccumulator("test files");
    LongAccumulator bytes = sc.longAccumulator("test bytes");
    long tenSecondsAgo = System.nanoTime() - TimeUnit.SECONDS.toNanos(10);
    try (ConsoleProgress progress =
        ConsoleProgress.start("run", 100, files, bytes, sc, tenSecondsAgo)) {
      files.add(25);
      bytes.add(50_000_000);
      String line = progress.text();
      // 25 files and 50 MB in 10 s: 2.5 files/s (shown as 2 or 3), 5.0 MB/s, 75 files left:
      // 0:00:30.
      assertTrue(
          line.matches(
              "run 25/100 files  [23] files/s  5\\.0 MB/s  elapsed 0:00:10  ETA 0:00:[23]\\d"),
          line);
    }
  }
}
