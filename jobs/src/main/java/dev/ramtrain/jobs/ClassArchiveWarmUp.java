package dev.ramtrain.jobs;

import dev.ramtrain.jobs.cli.SparkSessions;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine;

/**
 * What bin/ramtrain runs once per build and JVM under {@code -XX:ArchiveClassesAtExit}: the start
 * every command shares (the command line's classes, an embedded Spark session and one small job),
 * so that the JVM's class archive holds them and later starts map them instead of loading them from
 * the jars again.
 */
public final class ClassArchiveWarmUp {
  private ClassArchiveWarmUp() {}

  public static void main(String[] args) {
    new CommandLine(new Main()).getUsageMessage(); // every command's options, as a parse reads them
    SparkSession spark = SparkSessions.open("ramtrain class archive", "local[1]");
    try {
      spark.range(4).selectExpr("id * 2 AS twice").collectAsList();
    } finally {
      spark.stop();
    }
  }
}
