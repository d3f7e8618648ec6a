package dev.ramtrain.etl.spark;

import java.util.List;

/**
 * Where a preprocessing run's time went: the driver's phases (listing and planning, the Spark job,
 * the commit), each Spark stage from its task metrics, and how the shard tasks split their own time
 * between reading files, decoding and transforming, and appending to shards.
 */
public record PreprocessTiming(
    double planSeconds,
    double jobSeconds,
    double commitSeconds,
    List<Stage> stages,
    double readSeconds,
    double decodeSeconds,
    double writeSeconds) {

  /** One Spark stage; times in seconds, task times summed over its tasks. */
  public record Stage(
      int id,
      String name,
      int tasks,
      double wall,
      double task,
      double cpu,
      double gc,
      double deserialize,
      long shuffleWriteBytes,
      double shuffleWrite,
      long shuffleReadBytes,
      double fetchWait) {}

  public double totalSeconds() {
    return planSeconds + jobSeconds + commitSeconds;
  }

  /** A few lines for the log and the command's summary. */
  public String describe() {
    StringBuilder text =
        new StringBuilder(
            String.format(
                "time %.1f s: list and plan %.2f s, Spark job %.2f s, commit %.2f s",
                totalSeconds(), planSeconds, jobSeconds, commitSeconds));
    for (Stage s : stages) {
      text.append(
          String.format(
              "%n  stage %d (%s, %d tasks): %.2f s wall; tasks %.2f s (cpu %.2f, gc %.2f,"
                  + " deserialize %.2f)",
              s.id(), s.name(), s.tasks(), s.wall(), s.task(), s.cpu(), s.gc(), s.deserialize()));
      if (s.shuffleWriteBytes() > 0) {
        text.append(
            String.format(
                "; shuffle write %.1f MB in %.2f s",
                s.shuffleWriteBytes() / 1e6, s.shuffleWrite()));
      }
      if (s.shuffleReadBytes() > 0) {
        text.append(
            String.format(
                "; shuffle read %.1f MB, fetch wait %.2f s",
                s.shuffleReadBytes() / 1e6, s.fetchWait()));
      }
    }
    text.append(
        String.format(
            "%n  shard tasks: read files %.2f s, decode and transform %.2f s, append to shards %.2f s",
            readSeconds, decodeSeconds, writeSeconds));
    return text.toString();
  }
}
