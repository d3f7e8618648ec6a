package dev.ramtrain.etl.spark;

import java.io.Serializable;
import org.apache.spark.SparkContext;
import org.apache.spark.util.LongAccumulator;

/**
 * What shard tasks count per file: files and input bytes (the progress line), and the nanoseconds
 * spent reading files, decoding and transforming them, and appending them to shards (the stage
 * breakdown). Tasks add per file; running tasks' values reach the driver with heartbeats.
 */
record ShardCounters(
    LongAccumulator files,
    LongAccumulator bytes,
    LongAccumulator readNanos,
    LongAccumulator decodeNanos,
    LongAccumulator writeNanos)
    implements Serializable {

  static ShardCounters register(SparkContext sc) {
    return new ShardCounters(
        sc.longAccumulator("ramtrain.files"),
        sc.longAccumulator("ramtrain.bytes"),
        sc.longAccumulator("ramtrain.read-nanos"),
        sc.longAccumulator("ramtrain.decode-nanos"),
        sc.longAccumulator("ramtrain.write-nanos"));
  }
}
