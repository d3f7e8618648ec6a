package dev.ramtrain.etl.source;

import static org.apache.spark.sql.functions.col;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * {@code root/<class>/**\/*.{jpg,jpeg,png,bmp,gif}}, classes sorted by name as torchvision's
 * ImageFolder does, read with Spark's {@code binaryFile} source. Keys are paths relative to root.
 */
public final class ImageFolderSource implements ImageSource {
  static final String IMAGE_EXTENSIONS = "(?i).*\\.(jpe?g|png|bmp|gif)$";

  private final String root;

  public ImageFolderSource(String root) {
    this.root = root.endsWith("/") ? root.substring(0, root.length() - 1) : root;
  }

  @Override
  public String type() {
    return "image-folder";
  }

  @Override
  public String path() {
    return root;
  }

  @Override
  public Map<String, String> options() {
    return Map.of();
  }

  @Override
  public List<String> classes(SparkSession spark) throws IOException {
    Path dir = new Path(root);
    FileSystem fs = dir.getFileSystem(spark.sparkContext().hadoopConfiguration());
    if (!fs.exists(dir)) {
      throw new IOException("image folder " + root + " does not exist");
    }
    List<String> classes = new ArrayList<>();
    for (FileStatus status : fs.listStatus(dir)) {
      String name = status.getPath().getName();
      if (status.isDirectory() && !name.startsWith(".") && !name.startsWith("_")) {
        classes.add(name);
      }
    }
    classes.sort(null);
    return classes;
  }

  @Override
  public Map<String, Long> countBySplit(SparkSession spark, double valFraction) {
    return ImageSource.hashSplitCounts(files(spark).select("path").count(), valFraction);
  }

  @Override
  public JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) throws IOException {
    String prefix = qualifiedRoot(spark) + "/";
    Map<String, Integer> labels = new HashMap<>();
    for (int i = 0; i < classes.size(); i++) {
      labels.put(classes.get(i), i);
    }
    JavaRDD<RawSample> files =
        files(spark)
            .select("path", "content")
            .javaRDD()
            .filter(row -> row.getString(0).startsWith(prefix))
            .map(row -> toSample(row.getString(0), (byte[]) row.get(1), prefix, labels));
    // Spark's file scan skips zero-byte files; list them here so they are rejected and reported.
    List<RawSample> empty = new ArrayList<>();
    for (String path : emptyFiles(spark)) {
      empty.add(toSample(path, new byte[0], prefix, labels));
    }
    return files
        .union(new JavaSparkContext(spark.sparkContext()).parallelize(empty, 1))
        .filter(sample -> sample.label() >= 0);
  }

  private List<String> emptyFiles(SparkSession spark) throws IOException {
    Path dir = new Path(root);
    FileSystem fs = dir.getFileSystem(spark.sparkContext().hadoopConfiguration());
    List<String> empty = new ArrayList<>();
    RemoteIterator<LocatedFileStatus> it = fs.listFiles(dir, true);
    while (it.hasNext()) {
      LocatedFileStatus status = it.next();
      String path = fs.makeQualified(status.getPath()).toString();
      if (status.getLen() == 0 && path.matches(IMAGE_EXTENSIONS) && !isHidden(path)) {
        empty.add(path);
      }
    }
    return empty;
  }

  private static boolean isHidden(String path) {
    return path.contains("/.") || path.contains("/_");
  }

  private static RawSample toSample(
      String path, byte[] content, String prefix, Map<String, Integer> labels) {
    String key = path.substring(prefix.length());
    int slash = key.indexOf('/');
    Integer label = slash > 0 ? labels.get(key.substring(0, slash)) : null;
    return RawSample.encoded(
        key, content == null ? new byte[0] : content, label == null ? -1 : label, null);
  }

  private Dataset<Row> files(SparkSession spark) {
    return spark
        .read()
        .format("binaryFile")
        .option("recursiveFileLookup", "true")
        .load(root)
        .filter(col("path").rlike(IMAGE_EXTENSIONS));
  }

  private String qualifiedRoot(SparkSession spark) throws IOException {
    Path dir = new Path(root);
    FileSystem fs = dir.getFileSystem(spark.sparkContext().hadoopConfiguration());
    return fs.makeQualified(dir).toString();
  }
}
