package dev.ramtrain.etl.source;

import static org.apache.spark.sql.functions.col;

import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
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
  static final String IMAGE_EXTENSIONS = "(?i).*\\.(jpe?g|png|bmp|gif|webp|tiff?)$";

  private static final int FILES_PER_READ_TASK = 2000;

  private final String root;
  private transient Listing listing; // one walk per job, on the driver

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
  public Map<String, Long> countBySplit(SparkSession spark, double valFraction) throws IOException {
    return ImageSource.hashSplitCounts(listing(spark).files(), valFraction);
  }

  @Override
  public JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) throws IOException {
    String prefix = qualifiedRoot(spark) + "/";
    Map<String, Integer> labels = new HashMap<>();
    for (int i = 0; i < classes.size(); i++) {
      labels.put(classes.get(i), i);
    }
    Listing listing = listing(spark);
    JavaRDD<Row> rows = files(spark).select("path", "content").javaRDD();
    // Spark packs small files as if each cost 4 MB to open (spark.sql.files.openCostInBytes), so a
    // folder of small images becomes hundreds of tiny read tasks whose scheduling dominates the
    // read. Merge them (no shuffle) into tasks of about FILES_PER_READ_TASK files.
    long wanted =
        Math.max(
            2L * spark.sparkContext().defaultParallelism(), listing.files() / FILES_PER_READ_TASK);
    if (wanted < rows.getNumPartitions()) {
      rows = rows.coalesce((int) wanted);
    }
    JavaRDD<RawSample> files =
        rows.filter(row -> row.getString(0).startsWith(prefix))
            .map(row -> toSample(row.getString(0), (byte[]) row.get(1), prefix, labels));
    // Spark's file scan skips zero-byte files; list them here so they are rejected and reported.
    List<RawSample> empty = new ArrayList<>();
    for (String path : listing.emptyFiles()) {
      empty.add(toSample(path, new byte[0], prefix, labels));
    }
    // Files at the root (in no class folder) keep label -1: rejected and listed, never dropped.
    return files.union(new JavaSparkContext(spark.sparkContext()).parallelize(empty, 1));
  }

  /** Image files under root (hidden ones excluded), and which of them are empty. */
  private record Listing(long files, List<String> emptyFiles) {}

  /**
   * Walks root once per job on the driver: the exact input count for shard planning, and the
   * zero-byte files that Spark's scan would skip silently. A plain listStatus walk, because
   * listFiles' LocatedFileStatus loads permissions, which the local filesystem does by forking a
   * process per file.
   */
  private Listing listing(SparkSession spark) throws IOException {
    if (listing != null) {
      return listing;
    }
    Path dir = new Path(root);
    FileSystem fs = dir.getFileSystem(spark.sparkContext().hadoopConfiguration());
    List<String> empty = new ArrayList<>();
    long files = 0;
    ArrayDeque<Path> pending = new ArrayDeque<>(List.of(dir));
    while (!pending.isEmpty()) {
      for (FileStatus status : fs.listStatus(pending.pop())) {
        String name = status.getPath().getName();
        if (name.startsWith(".") || name.startsWith("_")) {
          continue;
        }
        if (status.isDirectory()) {
          pending.push(status.getPath());
        } else if (name.matches(IMAGE_EXTENSIONS)) {
          files++;
          if (status.getLen() == 0) {
            empty.add(fs.makeQualified(status.getPath()).toString());
          }
        }
      }
    }
    listing = new Listing(files, empty);
    return listing;
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
