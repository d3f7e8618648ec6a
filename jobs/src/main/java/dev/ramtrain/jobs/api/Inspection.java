package dev.ramtrain.jobs.api;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.jobs.report.ContactSheet;
import dev.ramtrain.jobs.report.DatasetReport;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** A committed dataset as a note looks at it: its summary, class balance and samples. */
public final class Inspection {
  private final SparkSession spark;
  private final dev.ramtrain.etl.dataset.Dataset dataset;

  private Inspection(SparkSession spark, dev.ramtrain.etl.dataset.Dataset dataset) {
    this.spark = spark;
    this.dataset = dataset;
  }

  static Inspection of(SparkSession spark, String location) throws IOException {
    return new Inspection(
        spark,
        dev.ramtrain.etl.dataset.Dataset.open(
            location, spark.sparkContext().hadoopConfiguration()));
  }

  public String location() {
    return dataset.location();
  }

  public List<String> classes() {
    return dataset.manifest().classes();
  }

  /** Rows in {@code split} (train, val). */
  public long samples(String split) {
    return dataset.manifest().split(split).rows();
  }

  /** What {@code ramtrain inspect} prints: format, images, what preprocessing did, splits. */
  public String summary() {
    return DatasetReport.summary(dataset);
  }

  /** One row per class and split: class, split, samples (a bar chart in Zeppelin). */
  public Dataset<Row> classBalance() {
    Manifest m = dataset.manifest();
    List<Row> rows = new ArrayList<>();
    for (var split : new TreeMap<>(m.splits()).entrySet()) {
      List<Long> counts = split.getValue().classCounts();
      for (int c = 0; c < m.classes().size(); c++) {
        rows.add(RowFactory.create(m.classes().get(c), split.getKey(), counts.get(c)));
      }
    }
    StructType schema =
        new StructType()
            .add("class", DataTypes.StringType)
            .add("split", DataTypes.StringType)
            .add("samples", DataTypes.LongType);
    return spark.createDataFrame(rows, schema);
  }

  /**
   * A contact sheet of {@code samples} train samples (class-labelled tiles) as an HTML image: print
   * it after {@code %html} in a Zeppelin paragraph.
   */
  public String contactSheetHtml(int samples) throws IOException {
    Manifest m = dataset.manifest();
    var picked = DatasetReport.samples(dataset, Manifest.TRAIN, samples);
    return Html.image(
        ContactSheet.draw(picked, m.image().shape(), m.classes()),
        "contact sheet of " + dataset.location());
  }

  @Override
  public String toString() {
    return summary();
  }
}
