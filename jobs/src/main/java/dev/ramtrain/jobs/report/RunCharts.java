package dev.ramtrain.jobs.report;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import java.util.function.ToDoubleFunction;

/**
 * The charts of one run, or of several overlaid (each line then named after its run): what the
 * metrics records hold, chart by chart. Charts without data (no offloading, say) are left out.
 */
public final class RunCharts {
  private static final double MIB = 1 << 20;

  /** Every chart's id: the names of the PNGs a report writes. */
  static final Set<String> IDS =
      Set.of(
          "step-loss",
          "loss",
          "accuracy",
          "lr",
          "throughput",
          "data-stall",
          "offload",
          "copied",
          "memory");

  private RunCharts() {}

  public static List<Chart> of(List<RunRecord> runs) {
    List<Chart> charts = new ArrayList<>();
    charts.add(
        chart(
            "step-loss",
            "Training loss, every step",
            "step",
            "loss",
            true,
            true,
            runs,
            r -> List.of(new Chart.Series("loss", r.lossSteps(), r.stepLoss()))));
    charts.add(
        chart(
            "loss",
            "Loss per epoch",
            "epoch",
            "loss",
            true,
            false,
            runs,
            r ->
                withAverage(
                    r,
                    "val_loss",
                    series("train", r.epochs(), "epoch", v -> v.path("train_loss").asDouble()),
                    series("val", r.epochs(), "epoch", v -> v.path("val_loss").asDouble()))));
    charts.add(
        chart(
            "accuracy",
            "Accuracy per epoch",
            "epoch",
            "accuracy",
            false,
            false,
            runs,
            r ->
                withAverage(
                    r,
                    "val_acc",
                    series("train", r.epochs(), "epoch", v -> v.path("train_acc").asDouble()),
                    series("val", r.epochs(), "epoch", v -> v.path("val_acc").asDouble()))));
    charts.add(
        chart(
            "lr",
            "Learning rate",
            "step",
            "learning rate",
            true,
            false,
            runs,
            r -> List.of(series("lr", r.stepsWith("lr"), "step", v -> v.path("lr").asDouble()))));
    charts.add(
        chart(
            "throughput",
            "Throughput",
            "step",
            "samples/s",
            false,
            true,
            runs,
            r ->
                List.of(
                    series(
                        "samples/s",
                        r.stepsWith("samples_per_s"),
                        "step",
                        v -> v.path("samples_per_s").asDouble()))));
    charts.add(
        chart(
            "data-stall",
            "Data stall: share of the epoch the loop waited for batches",
            "epoch",
            "% of epoch time",
            false,
            false,
            runs,
            r ->
                List.of(
                    series(
                        "data stall %",
                        r.epochs(), "epoch", v -> v.path("data_stall_pct").asDouble()))));
    charts.add(
        chart(
            "offload",
            "Offloaded steps: where the time goes",
            "step",
            "ms",
            true,
            false,
            runs,
            r -> {
              List<JsonNode> s = r.stepsWith("h2d_bytes");
              return List.of(
                  series("step", s, "step", v -> v.path("step_ms").asDouble()),
                  series("compute", s, "step", v -> v.path("compute_ms").asDouble()),
                  series(
                      "copies in + out",
                      s,
                      "step",
                      v -> v.path("copy_in_ms").asDouble() + v.path("copy_out_ms").asDouble()),
                  series("exposed copies", s, "step", v -> v.path("exposed_copy_ms").asDouble()),
                  series("host optimizer", s, "step", v -> v.path("host_optimizer_ms").asDouble()),
                  series(
                      "exposed optimizer",
                      s,
                      "step",
                      v -> v.path("optimizer_exposed_ms").asDouble()));
            }));
    charts.add(
        chart(
            "copied",
            "Offloaded steps: bytes copied",
            "step",
            "MiB per step",
            false,
            false,
            runs,
            r -> {
              List<JsonNode> s = r.stepsWith("h2d_bytes");
              return List.of(
                  series("host to device", s, "step", v -> v.path("h2d_bytes").asDouble() / MIB),
                  series("device to host", s, "step", v -> v.path("d2h_bytes").asDouble() / MIB));
            }));
    charts.add(
        chart(
            "memory",
            "Memory",
            "step",
            "MiB",
            true,
            false,
            runs,
            r ->
                List.of(
                    series(
                        "device peak",
                        r.stepsWith("peak_device_bytes"),
                        "step",
                        v -> v.path("peak_device_bytes").asDouble() / MIB),
                    series(
                        "pinned host",
                        r.stepsWith("pinned_host_bytes"),
                        "step",
                        v -> v.path("pinned_host_bytes").asDouble() / MIB),
                    series(
                        "JVM heap in use",
                        r.stepsWith("heap_used_bytes"),
                        "step",
                        v -> v.path("heap_used_bytes").asDouble() / MIB))));
    return charts.stream().filter(c -> !c.isEmpty()).toList();
  }

  /** A chart of {@code lines}' series for every run, named after the run when there are several. */
  private static Chart chart(
      String id,
      String title,
      String xLabel,
      String yLabel,
      boolean log,
      boolean smooth,
      List<RunRecord> runs,
      Function<RunRecord, List<Chart.Series>> lines) {
    List<Chart.Series> all = new ArrayList<>();
    for (int r = 0; r < runs.size(); r++) {
      RunRecord run = runs.get(r);
      List<Chart.Series> own = lines.apply(run);
      for (int line = 0; line < own.size(); line++) {
        Chart.Series s = own.get(line);
        if (s.x().length == 0) {
          continue;
        }
        String label = runs.size() > 1 ? run.name() + ": " + s.label() : s.label();
        all.add(new Chart.Series(label, s.x(), s.y(), r, line));
      }
    }
    if (!IDS.contains(id)) {
      throw new IllegalStateException("chart " + id + " is missing from RunCharts.IDS");
    }
    return new Chart(id, title, xLabel, yLabel, log, smooth, all);
  }

  /**
   * {@code train} and {@code val}, and, for a run with --ema, the average's {@code key} ({@code
   * KEY_ema}) over the epochs that recorded it.
   */
  private static List<Chart.Series> withAverage(
      RunRecord r, String key, Chart.Series train, Chart.Series val) {
    List<JsonNode> averaged = r.epochs().stream().filter(v -> v.has(key + "_ema")).toList();
    if (averaged.isEmpty()) {
      return List.of(train, val);
    }
    return List.of(
        train, val, series("val (EMA)", averaged, "epoch", v -> v.path(key + "_ema").asDouble()));
  }

  private static Chart.Series series(
      String label, List<JsonNode> records, String xKey, ToDoubleFunction<JsonNode> y) {
    double[] xs = new double[records.size()];
    double[] ys = new double[records.size()];
    for (int i = 0; i < records.size(); i++) {
      xs[i] = records.get(i).path(xKey).asDouble();
      ys[i] = y.applyAsDouble(records.get(i));
    }
    return new Chart.Series(label, xs, ys);
  }
}
