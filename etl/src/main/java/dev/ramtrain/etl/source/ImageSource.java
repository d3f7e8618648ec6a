package dev.ramtrain.etl.source;

import java.io.IOException;
import java.io.Serializable;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.SparkSession;

/** A raw dataset that Spark executors read in parallel. */
public interface ImageSource extends Serializable {

  /** Name recorded in the manifest ({@code image-folder}, {@code parquet}, ...). */
  String type();

  String path();

  /** Settings recorded in the manifest so a dataset says where it came from. */
  Map<String, String> options();

  /** Class names in label order (label i is {@code classes().get(i)}). */
  List<String> classes(SparkSession spark) throws IOException;

  /**
   * Whether the source carries its own train/val split (MNIST's t10k files, CIFAR's test batch):
   * then {@code ramtrain.etl.val-fraction} is not used.
   */
  default boolean ownSplits() {
    return false;
  }

  /**
   * Inputs per split, for shard planning: exact for sources that carry their own split, otherwise
   * the total divided by {@code valFraction}. Cheap: no image bytes are read.
   */
  Map<String, Long> countBySplit(SparkSession spark, double valFraction) throws IOException;

  /** Every input, with labels indexed by {@code classes}. */
  JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) throws IOException;

  /**
   * Every input as the driver already holds it (a walked folder: references, not bytes), or null
   * when only executors can enumerate them (records inside files). The default is null.
   */
  default List<RawSample> listedOnDriver(SparkSession spark, List<String> classes)
      throws IOException {
    return null;
  }

  /** Where a sample came from, for the rejects list. */
  default String locate(String key) {
    return path() + "/" + key;
  }

  /** Estimated split sizes for sources without their own split. */
  static Map<String, Long> hashSplitCounts(long total, double valFraction) {
    long val = Math.round(total * valFraction);
    return Map.of("train", total - val, "val", val);
  }
}
