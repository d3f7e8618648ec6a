package dev.ramtrain.jobs;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Reads a run directory's metrics.jsonl back, for tests that compare runs. */
public final class RunMetrics {
  private RunMetrics() {}

  /** The run's epoch records (JSON lines), in order. */
  public static List<String> epochs(Path run) throws IOException {
    return Files.readAllLines(run.resolve("metrics.jsonl")).stream()
        .filter(l -> l.contains("\"type\":\"epoch\""))
        .toList();
  }

  /** The number {@code key} holds in the JSON line {@code json}; fails if it holds none. */
  public static double figure(String json, String key) {
    Matcher m = Pattern.compile("\"" + key + "\":([-0-9.eE]+)").matcher(json);
    assertTrue(m.find(), key + " in " + json);
    return Double.parseDouble(m.group(1));
  }
}
