package dev.ramtrain.jobs.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;

/**
 * The settings a run's latest checkpoint recorded ({@link RunFingerprint}'s), which {@code
 * --resume} starts from: a resume without flags continues the run as it was set, and the flags
 * given with it are the changes, checked as such. Empty where the run has no local checkpoint (the
 * resume's own refusal then says so).
 */
public final class RecordedSettings {
  private RecordedSettings() {}

  public static Map<String, String> of(Path run) throws IOException {
    Path root = run.resolve(RunDirectory.CHECKPOINTS);
    Path latest = root.resolve(Checkpoints.LATEST);
    Map<String, String> settings = new TreeMap<>();
    if (!Files.isRegularFile(latest)) {
      return settings;
    }
    String name = Files.readString(latest, StandardCharsets.UTF_8).strip();
    if (!Checkpoints.isName(name)) {
      return settings; // the resume reports the damaged pointer
    }
    Path state = root.resolve(name).resolve("state.json");
    if (!Files.isRegularFile(state)) {
      return settings;
    }
    JsonNode recorded = new ObjectMapper().readTree(state.toFile()).path(RunFingerprint.SETTINGS);
    recorded.fields().forEachRemaining(e -> settings.put(e.getKey(), e.getValue().asText()));
    return RunFingerprint.withSettingsAddedLater(settings);
  }
}
