package dev.ramtrain.jobs.api;

import dev.ramtrain.jobs.report.StaticCharts;
import dev.ramtrain.trainer.EvalResult;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** A checkpoint's evaluation on a split: figures, per-class accuracy, the confusion matrix. */
public final class Evaluated {
  private final SparkSession spark;
  private final String split;
  private final EvalResult eval;
  private final List<String> classes;

  Evaluated(SparkSession spark, String split, EvalResult eval, List<String> classes) {
    this.spark = spark;
    this.split = split;
    this.eval = eval;
    this.classes = List.copyOf(classes);
  }

  public double accuracy() {
    return eval.accuracy();
  }

  public double loss() {
    return eval.loss();
  }

  public long samples() {
    return eval.samples();
  }

  /** One row per class: class, samples, correct, accuracy. */
  public Dataset<Row> classAccuracy() {
    List<Row> rows = new ArrayList<>();
    for (int c = 0; c < classes.size(); c++) {
      long total = 0;
      for (long n : eval.confusion()[c]) {
        total += n;
      }
      rows.add(
          RowFactory.create(
              classes.get(c),
              total,
              eval.confusion()[c][c],
              total == 0 ? null : (double) eval.confusion()[c][c] / total));
    }
    StructType schema =
        new StructType()
            .add("class", DataTypes.StringType)
            .add("samples", DataTypes.LongType)
            .add("correct", DataTypes.LongType)
            .add("accuracy", DataTypes.DoubleType);
    return spark.createDataFrame(rows, schema);
  }

  /** The confusion matrix as rows: true_class, predicted_class, samples. */
  public Dataset<Row> confusion() {
    List<Row> rows = new ArrayList<>();
    for (int t = 0; t < classes.size(); t++) {
      for (int p = 0; p < classes.size(); p++) {
        rows.add(RowFactory.create(classes.get(t), classes.get(p), eval.confusion()[t][p]));
      }
    }
    StructType schema =
        new StructType()
            .add("true_class", DataTypes.StringType)
            .add("predicted_class", DataTypes.StringType)
            .add("samples", DataTypes.LongType);
    return spark.createDataFrame(rows, schema);
  }

  /** The confusion matrix drawn (% of each true class), for a {@code %html} paragraph. */
  public String confusionHtml() throws IOException {
    return Html.image(
        StaticCharts.confusionImage(
            String.format(
                "Confusion matrix, %% of each true class (%s accuracy %.1f%%)",
                split, 100 * eval.accuracy()),
            classes,
            eval.confusion()),
        "confusion matrix");
  }

  @Override
  public String toString() {
    return String.format(
        "%s accuracy %.4f, loss %.4f over %,d samples", split, accuracy(), loss(), samples());
  }
}
