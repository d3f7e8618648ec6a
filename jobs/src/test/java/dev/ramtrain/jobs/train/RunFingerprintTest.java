package dev.ramtrain.jobs.train;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * A resume's comparison with the settings its checkpoint records: the same ones pass, a change is
 * refused naming the key, the old value and the new, and a key one side lacks says why rather than
 * "(unset)": a constant schedule's run records no length, so a longer cosine resume names the
 * schedule and says the length was not part of that run.
 */
class RunFingerprintTest {
  private static Checkpoints.Loaded checkpoint(Map<String, String> settings) {
    return new Checkpoints.Loaded(
        Path.of("run/checkpoints/epoch-0004"),
        Map.of("settings", settings, "data_fingerprint", "sha256:same"),
        Map.of(),
        List.of());
  }

  @Test
  void aChangedScheduleNamesWhatTheCheckpointDidNotRecord() {
    Map<String, String> recorded = Map.of("ramtrain.train.schedule", "constant");
    TreeMap<String, String> now = new TreeMap<>(recorded);
    assertDoesNotThrow(
        () -> RunFingerprint.requireSameRun(checkpoint(recorded), now, "sha256:same", false));
    now.put("ramtrain.train.schedule", "cosine");
    now.put("ramtrain.train.epochs", "5");
    ConfigException e =
        assertThrows(
            ConfigException.class,
            () -> RunFingerprint.requireSameRun(checkpoint(recorded), now, "sha256:same", false));
    String message = e.getMessage();
    assertTrue(
        message.contains(
            "ramtrain.train.epochs (not recorded: that run's schedule did not depend on its"
                + " length) -> 5"),
        message);
    assertTrue(message.contains("ramtrain.train.schedule constant -> cosine"), message);
    assertTrue(!message.contains("(unset)"), message);
  }

  @Test
  void aRecordedLengthThatNoLongerMattersSaysSo() {
    Map<String, String> recorded =
        Map.of("ramtrain.train.schedule", "cosine", "ramtrain.train.epochs", "4");
    TreeMap<String, String> now = new TreeMap<>(Map.of("ramtrain.train.schedule", "constant"));
    ConfigException e =
        assertThrows(
            ConfigException.class,
            () -> RunFingerprint.requireSameRun(checkpoint(recorded), now, "sha256:same", false));
    assertTrue(
        e.getMessage()
            .contains(
                "ramtrain.train.epochs 4 -> (not used: this schedule does not depend on the run's"
                    + " length)"),
        e.getMessage());
  }
}
