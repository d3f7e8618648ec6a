package dev.ramtrain.jobs.train;

import dev.ramtrain.format.Manifest;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a checkpoint records of the run that wrote it, so that {@code --resume} continues the same
 * run: the settings that change its numbers ({@code TrainSettings.resumeSettings}) and a
 * fingerprint of its data. A resume that would silently train on other data or with another
 * learning rate is refused, naming what changed, unless {@code --resume-anyway}.
 */
public final class RunFingerprint {
  private static final Logger LOG = LoggerFactory.getLogger(RunFingerprint.class);
  static final String SETTINGS = "settings";
  static final String DATA = "data_fingerprint";

  private RunFingerprint() {}

  /**
   * SHA-256 over the image shape, the classes and every shard's rows, bytes and CRC32C in split
   * order: the same data gives the same fingerprint wherever it lies (another directory, a later
   * version folder, in memory) and other data another one.
   */
  public static String data(Manifest m) {
    StringBuilder canonical = new StringBuilder();
    canonical.append(m.image().shape()).append('\n').append(m.classes()).append('\n');
    for (var split : new TreeMap<>(m.splits()).entrySet()) {
      canonical.append(split.getKey()).append('\n');
      for (Manifest.Shard s : split.getValue().shards()) {
        canonical.append(s.rows()).append(' ').append(s.bytes()).append(' ').append(s.crc32c());
        canonical.append('\n');
      }
    }
    try {
      byte[] hash =
          MessageDigest.getInstance("SHA-256")
              .digest(canonical.toString().getBytes(StandardCharsets.UTF_8));
      return "sha256:" + HexFormat.of().formatHex(hash);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java runtime has SHA-256", e);
    }
  }

  /** What a checkpoint's state.json gets: the settings and the data fingerprint. */
  public static Map<String, Object> record(SortedMap<String, String> settings, String data) {
    return Map.of(SETTINGS, settings, DATA, data);
  }

  /**
   * Settings newer than some checkpoints, with the value that computes what those checkpoints' runs
   * computed: a checkpoint without the key resumes under that value as unchanged.
   */
  private static final Map<String, String> ADDED_LATER =
      Map.of(
          "ramtrain.train.precision",
          "fp32",
          "ramtrain.train.accumulate",
          "1",
          "ramtrain.train.weights",
          "",
          "ramtrain.train.layer-decay",
          "1.0",
          "ramtrain.train.freeze",
          "",
          "ramtrain.train.drop-path",
          "0",
          "ramtrain.train.ema",
          "0",
          // before the setting existed, weight decay applied to every parameter
          "ramtrain.train.weight-decay-groups",
          "all",
          // no release computed with TF32 before the setting; its default resumes such runs, as
          // the engines' other changes between releases do, and a changed value is still refused
          "ramtrain.cuda.tf32",
          "convolutions",
          // runs before the warm-up decayed by ema from the first step
          "ramtrain.train.ema-warmup",
          "false");

  /**
   * {@code recorded} (a checkpoint's settings) with the value each setting newer than it computed
   * then: what a resume of that run starts from.
   */
  static Map<String, String> withSettingsAddedLater(Map<String, String> recorded) {
    Map<String, String> all = new java.util.TreeMap<>(recorded);
    if (!recorded.isEmpty()) {
      ADDED_LATER.forEach(all::putIfAbsent);
    }
    return all;
  }

  private static final String EPOCHS = "ramtrain.train.epochs";

  /** A setting the checkpoint does not record: why, where the reason is known. */
  private static String notRecorded(String key) {
    return key.equals(EPOCHS)
        ? "(not recorded: that run's schedule did not depend on its length)"
        : "(not recorded)";
  }

  /** A recorded setting this resume has no value for. */
  private static String notUsed(String key) {
    return key.equals(EPOCHS)
        ? "(not used: this schedule does not depend on the run's length)"
        : "(not set)";
  }

  /**
   * Fails (a usage error) if {@code c} was written by a run with other settings or data, unless
   * {@code anyway}, when the differences are only logged.
   */
  public static void requireSameRun(
      Checkpoints.Loaded c, SortedMap<String, String> settings, String data, boolean anyway) {
    Object recorded = c.state().get(SETTINGS);
    if (!(recorded instanceof Map<?, ?> before)) {
      LOG.warn(
          "{} records no settings (written by an older ramtrain): resuming without checking them",
          c.dir());
      return;
    }
    List<String> changes = new ArrayList<>();
    TreeSet<String> keys = new TreeSet<>(settings.keySet());
    before.keySet().forEach(k -> keys.add(String.valueOf(k)));
    for (String key : keys) {
      Object was = before.get(key);
      String now = settings.get(key);
      String wasText = was == null ? ADDED_LATER.get(key) : String.valueOf(was);
      if (!java.util.Objects.equals(wasText, now)) {
        changes.add(
            key
                + " "
                + (wasText == null ? notRecorded(key) : wasText)
                + " -> "
                + (now == null ? notUsed(key) : now));
      }
    }
    Object recordedData = c.state().get(DATA);
    if (recordedData != null && !recordedData.equals(data)) {
      changes.add(
          "the data (dataset " + c.state().get("dataset") + " then; its shards differ from these)");
    }
    if (changes.isEmpty()) {
      return;
    }
    String what = String.join("; ", changes);
    if (anyway) {
      LOG.warn("resuming {} with changes (--resume-anyway): {}", c.dir(), what);
      System.out.println("resuming anyway with changes: " + what);
      return;
    }
    throw new ConfigException(
        "--resume: "
            + c.dir()
            + " was written by a run with other settings or data: "
            + what
            + ". Resume with the same ones, start a new run, or pass --resume-anyway");
  }
}
