package dev.ramtrain.etl.source;

import dev.ramtrain.etl.dataset.HadoopConf;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * CIFAR-10 binary batches: {@code data_batch_*.bin} (train) and {@code test_batch.bin} (val), each
 * record a label byte and a 32x32 image as R, G and B planes; class names from {@code
 * batches.meta.txt}.
 */
public final class CifarSource implements ImageSource {
  static final int SIDE = 32;
  static final int RECORD = 1 + 3 * SIDE * SIDE;

  private final String dir;

  public CifarSource(String dir) {
    this.dir = dir;
  }

  @Override
  public String type() {
    return "cifar10";
  }

  @Override
  public String path() {
    return dir;
  }

  @Override
  public Map<String, String> options() {
    return Map.of();
  }

  @Override
  public List<String> classes(SparkSession spark) throws IOException {
    Path meta = new Path(dir, "batches.meta.txt");
    var fs = meta.getFileSystem(spark.sparkContext().hadoopConfiguration());
    if (!fs.exists(meta)) {
      List<String> digits = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        digits.add(Integer.toString(i));
      }
      return digits;
    }
    try (InputStream in = fs.open(meta)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8)
          .lines()
          .map(String::strip)
          .filter(s -> !s.isEmpty())
          .toList();
    }
  }

  @Override
  public boolean ownSplits() {
    return true;
  }

  @Override
  public Map<String, Long> countBySplit(SparkSession spark, double valFraction) throws IOException {
    Map<String, Long> counts = new TreeMap<>();
    Configuration conf = spark.sparkContext().hadoopConfiguration();
    for (String file : batches(conf)) {
      counts.merge(splitOf(file), records(file, conf), Long::sum);
    }
    return counts;
  }

  @Override
  public JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) throws IOException {
    Configuration conf = spark.sparkContext().hadoopConfiguration();
    List<RecordRange> ranges = new ArrayList<>();
    for (String file : batches(conf)) {
      RecordRange.split(ranges, file, null, records(file, conf), splitOf(file));
    }
    HadoopConf hadoop = new HadoopConf(conf);
    int classCount = classes.size();
    return new JavaSparkContext(spark.sparkContext())
        .parallelize(ranges, Math.max(1, ranges.size()))
        .flatMap(range -> read(range, classCount, hadoop.get()).iterator());
  }

  private static List<RawSample> read(RecordRange range, int classCount, Configuration conf)
      throws IOException {
    List<RawSample> out = new ArrayList<>(range.count());
    String name = RecordFiles.name(range.file());
    byte[] record = new byte[RECORD];
    int plane = SIDE * SIDE;
    try (DataInputStream in = RecordFiles.open(range.file(), range.first() * RECORD, conf)) {
      for (int i = 0; i < range.count(); i++) {
        in.readFully(record);
        byte[] hwc = new byte[3 * plane];
        for (int p = 0; p < plane; p++) { // planar RGB to interleaved HWC
          hwc[3 * p] = record[1 + p];
          hwc[3 * p + 1] = record[1 + plane + p];
          hwc[3 * p + 2] = record[1 + 2 * plane + p];
        }
        int label = record[0] & 0xFF;
        String key = name + "#" + (range.first() + i);
        out.add(
            RawSample.pixels(
                key, hwc, label < classCount ? label : -1, SIDE, SIDE, 3, range.split()));
      }
    }
    return out;
  }

  private List<String> batches(Configuration conf) throws IOException {
    List<String> files =
        RecordFiles.list(dir, conf).stream()
            .filter(f -> RecordFiles.name(f).matches("(data_batch_\\d+|test_batch)\\.bin"))
            .toList();
    if (files.isEmpty()) {
      throw new IOException("no data_batch_*.bin or test_batch.bin files in " + dir);
    }
    return files;
  }

  private static long records(String file, Configuration conf) throws IOException {
    long length = RecordFiles.length(file, conf);
    if (length % RECORD != 0) {
      throw new IOException(
          file
              + ": "
              + length
              + " bytes is not a whole number of "
              + RECORD
              + "-byte CIFAR-10 records (truncated?)");
    }
    return length / RECORD;
  }

  private static String splitOf(String file) {
    return RecordFiles.name(file).startsWith("test") ? "val" : "train";
  }
}
