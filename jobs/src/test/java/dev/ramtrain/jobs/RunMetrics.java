package dev.ramtrain.jobs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.trainer.checkpoint.Safetensors;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Reads a run directory's metrics.jsonl and checkpoints back, for tests that compare runs. */
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

  /**
   * The trained tensors of two checkpoints are the same, bit for bit; batch norm's running
   * statistics are left out (one process accumulating N batches updates them with each, N
   * data-parallel ranks follow rank 0's).
   */
  public static void assertSameTrainedWeights(Path expected, Path actual) throws IOException {
    Map<String, float[]> a = trained(expected);
    Map<String, float[]> b = trained(actual);
    assertEquals(a.keySet(), b.keySet(), expected + " and " + actual);
    for (String name : a.keySet()) {
      assertArrayEquals(a.get(name), b.get(name), name + " of " + actual);
    }
  }

  private static Map<String, float[]> trained(Path checkpoint) throws IOException {
    Map<String, float[]> tensors = new TreeMap<>();
    for (Safetensors.Tensor t :
        Safetensors.read(checkpoint.resolve("model.safetensors"), new HashMap<>()).values()) {
      if (!t.name().contains("running_")) {
        tensors.put(t.name(), t.values());
      }
    }
    assertFalse(tensors.isEmpty(), checkpoint.toString());
    return tensors;
  }
}
