package dev.ramtrain.etl.source;

import dev.ramtrain.etl.dataset.HadoopConf;
import java.io.DataInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * MNIST-family idx files in one directory: {@code <prefix>-images-idx3-ubyte[.gz]} with {@code
 * <prefix>-labels-idx1-ubyte[.gz]}. The {@code t10k}/{@code test} pair is the val split, the rest
 * train, as the files themselves define.
 */
public final class IdxSource implements ImageSource {
  private static final Pattern IMAGES = Pattern.compile("(.+)-images-idx3-ubyte(\\.gz)?");
  private static final int IMAGES_MAGIC = 0x00000803;
  private static final int LABELS_MAGIC = 0x00000801;

  private final String dir;
  private final List<String> classNames;

  public IdxSource(String dir, List<String> classNames) {
    this.dir = dir;
    this.classNames = List.copyOf(classNames);
  }

  @Override
  public String type() {
    return "idx";
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
    int max = -1;
    Configuration conf = spark.sparkContext().hadoopConfiguration();
    for (Pair pair : pairs(conf)) {
      try (DataInputStream in = RecordFiles.open(pair.labels, 8, conf)) {
        for (long i = 0; i < pair.count; i++) {
          max = Math.max(max, in.readUnsignedByte());
        }
      }
    }
    if (!classNames.isEmpty()) {
      if (classNames.size() <= max) {
        throw new IllegalArgumentException(
            "ramtrain.source.class-names has "
                + classNames.size()
                + " names but "
                + dir
                + " has label "
                + max);
      }
      return classNames;
    }
    List<String> classes = new ArrayList<>();
    for (int i = 0; i <= max; i++) {
      classes.add(Integer.toString(i));
    }
    return classes;
  }

  @Override
  public boolean ownSplits() {
    return true;
  }

  @Override
  public Map<String, Long> countBySplit(SparkSession spark, double valFraction) throws IOException {
    Map<String, Long> counts = new TreeMap<>();
    for (Pair pair : pairs(spark.sparkContext().hadoopConfiguration())) {
      counts.merge(pair.split, pair.count, Long::sum);
    }
    return counts;
  }

  @Override
  public JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) throws IOException {
    Configuration conf = spark.sparkContext().hadoopConfiguration();
    List<RecordRange> ranges = new ArrayList<>();
    Map<String, int[]> shapes = new HashMap<>();
    for (Pair pair : pairs(conf)) {
      RecordRange.split(ranges, pair.images, pair.labels, pair.count, pair.split);
      shapes.put(pair.images, new int[] {pair.rows, pair.cols});
    }
    HadoopConf hadoop = new HadoopConf(conf);
    return new JavaSparkContext(spark.sparkContext())
        .parallelize(ranges, Math.max(1, ranges.size()))
        .flatMap(range -> read(range, shapes.get(range.file()), hadoop.get()).iterator());
  }

  private static List<RawSample> read(RecordRange range, int[] shape, Configuration conf)
      throws IOException {
    int rows = shape[0];
    int cols = shape[1];
    int size = rows * cols;
    List<RawSample> out = new ArrayList<>(range.count());
    String name = RecordFiles.name(range.file());
    try (DataInputStream images = RecordFiles.open(range.file(), 16 + range.first() * size, conf);
        DataInputStream labels = RecordFiles.open(range.labelFile(), 8 + range.first(), conf)) {
      for (int i = 0; i < range.count(); i++) {
        byte[] pixels = new byte[size];
        images.readFully(pixels);
        int label = labels.readUnsignedByte();
        String key = name + "#" + (range.first() + i);
        out.add(RawSample.pixels(key, pixels, label, cols, rows, 1, range.split()));
      }
    }
    return out;
  }

  private record Pair(String images, String labels, long count, int rows, int cols, String split) {}

  private List<Pair> pairs(Configuration conf) throws IOException {
    List<String> files = RecordFiles.list(dir, conf);
    List<Pair> pairs = new ArrayList<>();
    for (String file : files) {
      Matcher m = IMAGES.matcher(RecordFiles.name(file));
      if (!m.matches()) {
        continue;
      }
      String prefix = m.group(1);
      String labels =
          files.stream()
              .filter(
                  f ->
                      RecordFiles.name(f)
                          .matches(Pattern.quote(prefix) + "-labels-idx1-ubyte(\\.gz)?"))
              .findFirst()
              .orElseThrow(
                  () ->
                      new IOException(
                          file + ": no matching " + prefix + "-labels-idx1-ubyte file"));
      int count;
      int rows;
      int cols;
      try (DataInputStream in = RecordFiles.open(file, 0, conf)) {
        checkMagic(in.readInt(), IMAGES_MAGIC, file);
        count = in.readInt();
        rows = in.readInt();
        cols = in.readInt();
      }
      try (DataInputStream in = RecordFiles.open(labels, 0, conf)) {
        checkMagic(in.readInt(), LABELS_MAGIC, labels);
        int labelCount = in.readInt();
        if (labelCount != count) {
          throw new IOException(
              labels + ": " + labelCount + " labels for " + count + " images in " + file);
        }
      }
      boolean test = prefix.startsWith("t10k") || prefix.startsWith("test");
      pairs.add(new Pair(file, labels, count, rows, cols, test ? "val" : "train"));
    }
    if (pairs.isEmpty()) {
      throw new IOException("no *-images-idx3-ubyte[.gz] files in " + dir);
    }
    return pairs;
  }

  private static void checkMagic(int magic, int expected, String file) throws IOException {
    if (magic != expected) {
      throw new IOException(
          String.format("%s: idx magic %08x, expected %08x", file, magic, expected));
    }
  }
}
