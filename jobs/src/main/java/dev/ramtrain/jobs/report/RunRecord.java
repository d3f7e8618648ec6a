package dev.ramtrain.jobs.report;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.files.IoErrors;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * What a report reads of one run directory: the epoch and step records of metrics.jsonl, every
 * step's loss (gathered from the records' {@code step_losses}), the latest checkpoint's state.json
 * (settings, build, dataset) and the final evaluation the report keeps, the last two when present.
 */
public record RunRecord(
    String name,
    Path dir,
    List<JsonNode> epochs,
    List<JsonNode> steps,
    double[] lossSteps,
    double[] stepLoss,
    JsonNode state,
    Evaluation evaluation) {
  private static final ObjectMapper JSON = new ObjectMapper();
  static final String METRICS = "metrics.jsonl";

  /** Reads the run in {@code dir}; a usage error names what is missing or unreadable. */
  /** The records' counters: each a whole number that a chart's axis can take. */
  private static final List<String> COUNTERS = List.of("epoch", "step", "step_losses_from");

  /** Doubles count exactly up to here; a chart's axis computes its ticks in doubles. */
  private static final long MAX_COUNTER = 1L << 53;

  public static RunRecord read(Path dir) throws IOException {
    Path metrics = dir.resolve(METRICS);
    if (!Files.isRegularFile(metrics)) {
      throw new NoSuchFileException(
          metrics.toString(), null, "no metrics.jsonl: not a ramtrain run directory");
    }
    List<JsonNode> epochs = new ArrayList<>();
    List<JsonNode> steps = new ArrayList<>();
    List<double[]> losses = new ArrayList<>();
    String text = Files.readString(metrics, StandardCharsets.UTF_8);
    List<String> lines = text.lines().toList();
    // A run killed while appending leaves its last line half-written, without its newline: the
    // report reads what came before, as train --resume does (any other bad line is an error).
    boolean torn = !text.isEmpty() && !text.endsWith("\n");
    int lineNumber = 0;
    for (String line : lines) {
      lineNumber++;
      if (line.isBlank()) {
        continue;
      }
      JsonNode record;
      try {
        record = JSON.readTree(line);
      } catch (IOException e) {
        if (torn && lineNumber == lines.size()) {
          break;
        }
        throw new IOException(
            metrics + " line " + lineNumber + " is not JSON: " + IoErrors.reason(e), e);
      }
      for (String counter : COUNTERS) {
        JsonNode n = record.get(counter);
        if (n != null
            && !(n.isIntegralNumber()
                && n.canConvertToLong()
                && n.asLong() >= 0
                && n.asLong() <= MAX_COUNTER)) {
          throw new IOException(
              metrics
                  + " line "
                  + lineNumber
                  + ": "
                  + counter
                  + " "
                  + n
                  + " is not a count a run writes (a whole number from 0 to 2^53)");
        }
      }
      (record.path("type").asText().equals("epoch") ? epochs : steps).add(record);
      long from = record.path("step_losses_from").asLong(-1);
      JsonNode values = record.path("step_losses");
      for (int i = 0; from >= 0 && i < values.size(); i++) {
        losses.add(new double[] {from + i, values.get(i).asDouble(Double.NaN)});
      }
    }
    // A resumed run's file repeats no step (it is cut back to its checkpoint), so steps ascend.
    double[] lossSteps = losses.stream().mapToDouble(p -> p[0]).toArray();
    double[] stepLoss = losses.stream().mapToDouble(p -> p[1]).toArray();
    JsonNode state = null;
    try {
      state = JSON.valueToTree(Checkpoints.latestState(dir));
    } catch (IOException e) {
      // no checkpoint (yet): the report has no settings section
    }
    Evaluation evaluation = Evaluation.read(dir.resolve("report"));
    Path name = dir.toAbsolutePath().normalize().getFileName();
    return new RunRecord(
        name == null ? dir.toString() : name.toString(),
        dir,
        epochs,
        steps,
        lossSteps,
        stepLoss,
        state,
        evaluation);
  }

  /** This run shown under another name. */
  public RunRecord named(String other) {
    return new RunRecord(other, dir, epochs, steps, lossSteps, stepLoss, state, evaluation);
  }

  /** The records among {@code steps} that carry {@code key}. */
  public List<JsonNode> stepsWith(String key) {
    return steps.stream().filter(r -> r.has(key)).toList();
  }
}
