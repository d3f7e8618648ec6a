package dev.ramtrain.etl.source;

import java.io.Serializable;

/** Records {@code [first, first + count)} of a fixed-size-record file, read by one Spark task. */
public record RecordRange(String file, String labelFile, long first, int count, String split)
    implements Serializable {

  /** Records per task: a few MB of small images, enough tasks to use every core. */
  static final int RECORDS_PER_RANGE = 8192;

  static void split(
      java.util.List<RecordRange> out, String file, String labelFile, long total, String split) {
    for (long first = 0; first < total; first += RECORDS_PER_RANGE) {
      out.add(
          new RecordRange(
              file, labelFile, first, (int) Math.min(RECORDS_PER_RANGE, total - first), split));
    }
  }
}
