package dev.ramtrain.etl.source;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.md5;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * A Parquet directory (or any Spark table, {@code table:<name>}) with an encoded-image column and a
 * label column. String labels are indexed in sorted order; integer labels in numeric order. Without
 * a key column, a sample's key is the MD5 of its bytes, so it is stable across partitionings.
 */
public final class TableSource implements ImageSource {
  private static final String TABLE_PREFIX = "table:";

  private final String path;
  private final String imageColumn;
  private final String labelColumn;
  private final String keyColumn;

  public TableSource(String path, String imageColumn, String labelColumn, String keyColumn) {
    this.path = path;
    this.imageColumn = imageColumn;
    this.labelColumn = labelColumn;
    this.keyColumn = keyColumn == null || keyColumn.isBlank() ? null : keyColumn;
  }

  @Override
  public String type() {
    return "parquet";
  }

  @Override
  public String path() {
    return path;
  }

  @Override
  public Map<String, String> options() {
    Map<String, String> options = new LinkedHashMap<>();
    options.put("image-column", imageColumn);
    options.put("label-column", labelColumn);
    options.put("key-column", keyColumn == null ? "" : keyColumn);
    return options;
  }

  @Override
  public String locate(String key) {
    return path + (keyColumn == null ? " row md5=" : " " + keyColumn + "=") + key;
  }

  @Override
  public List<String> classes(SparkSession spark) {
    Dataset<Row> table = table(spark);
    DataType type = table.schema().apply(labelColumn).dataType();
    boolean integral =
        type.equals(DataTypes.IntegerType)
            || type.equals(DataTypes.LongType)
            || type.equals(DataTypes.ShortType)
            || type.equals(DataTypes.ByteType);
    if (!integral && !type.equals(DataTypes.StringType)) {
      throw new IllegalArgumentException(
          path
              + ": label column '"
              + labelColumn
              + "' has type "
              + type.simpleString()
              + "; it must be a string or an integer (ramtrain.source.label-column)");
    }
    Dataset<Row> labels = table.select(col(labelColumn)).na().drop().distinct();
    List<String> classes = new ArrayList<>();
    if (integral) {
      labels
          .orderBy(col(labelColumn))
          .collectAsList()
          .forEach(r -> classes.add(r.get(0).toString()));
    } else {
      labels.collectAsList().forEach(r -> classes.add(r.getString(0)));
      classes.sort(null);
    }
    return classes;
  }

  @Override
  public Map<String, Long> countBySplit(SparkSession spark, double valFraction) {
    return ImageSource.hashSplitCounts(table(spark).select(labelColumn).count(), valFraction);
  }

  @Override
  public JavaRDD<RawSample> samples(SparkSession spark, List<String> classes) {
    Map<String, Integer> labels = new HashMap<>();
    for (int i = 0; i < classes.size(); i++) {
      labels.put(classes.get(i), i);
    }
    Dataset<Row> table = table(spark);
    var key = keyColumn == null ? md5(col(imageColumn)) : col(keyColumn).cast("string");
    return table
        .select(
            key.as("key"),
            col(imageColumn).as("image"),
            col(labelColumn).cast("string").as("label"))
        .javaRDD()
        .map(
            row -> {
              byte[] content = row.isNullAt(1) ? new byte[0] : (byte[]) row.get(1);
              Integer label = row.isNullAt(2) ? null : labels.get(row.getString(2));
              String k = row.isNullAt(0) ? "" : row.getString(0);
              return RawSample.encoded(k, content, label == null ? -1 : label, null);
            });
  }

  private Dataset<Row> table(SparkSession spark) {
    Dataset<Row> table =
        path.startsWith(TABLE_PREFIX)
            ? spark.table(path.substring(TABLE_PREFIX.length()))
            : spark.read().parquet(path);
    for (String column : new String[] {imageColumn, labelColumn, keyColumn}) {
      if (column != null && !List.of(table.columns()).contains(column)) {
        throw new IllegalArgumentException(
            path
                + ": no column '"
                + column
                + "' (columns: "
                + String.join(", ", table.columns())
                + "); set ramtrain.source.image-column / label-column / key-column");
      }
    }
    if (!table.schema().apply(imageColumn).dataType().equals(DataTypes.BinaryType)) {
      throw new IllegalArgumentException(
          path + ": image column '" + imageColumn + "' must be binary (encoded image bytes)");
    }
    return table;
  }
}
