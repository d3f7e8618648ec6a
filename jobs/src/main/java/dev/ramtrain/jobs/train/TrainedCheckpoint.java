package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.jobs.config.ConfigException;
import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.jobs.config.RamtrainConfig;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.data.Normalization;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * A checkpoint and what serving it needs from its state.json: model spec, classes, the image shape,
 * resize mode and decoder of the data it was trained on, and the normalization. {@link TrainingRun}
 * writes these, so evaluation and prediction never guess.
 */
public record TrainedCheckpoint(
    Checkpoints.Loaded loaded,
    String model,
    List<String> classes,
    ImageShape shape,
    ResizeMode resize,
    ImageDecoder.Kind decoder,
    boolean exifOrientation,
    Normalization normalization) {

  /** A checkpoint folder, or a run directory (its latest checkpoint). */
  public static TrainedCheckpoint open(Path checkpointOrRun) throws IOException {
    return open(checkpointOrRun, false);
  }

  /** {@code best}: a run directory's best checkpoint ({@code checkpoints/best}), not its latest. */
  public static TrainedCheckpoint open(Path checkpointOrRun, boolean best) throws IOException {
    if (!Files.isDirectory(checkpointOrRun)) {
      throw new IOException(
          "--checkpoint "
              + checkpointOrRun
              + ": no such checkpoint folder or run directory"
              + (Files.exists(checkpointOrRun) ? " (it is a file)" : ""));
    }
    boolean folder = Files.exists(checkpointOrRun.resolve("state.json"));
    if (best && folder) {
      throw new ConfigException(
          "--best picks a run directory's best checkpoint: " + checkpointOrRun + " is one already");
    }
    Checkpoints.Loaded c =
        folder
            ? Checkpoints.load(checkpointOrRun)
            : best
                ? Checkpoints.loadBest(checkpointOrRun)
                : Checkpoints.loadLatest(checkpointOrRun);
    Map<String, Object> state = c.state();
    ImageShape shape;
    List<String> classes;
    try {
      List<?> dims = (List<?>) state.get("image");
      shape =
          new ImageShape(
              ((Number) dims.get(0)).intValue(),
              ((Number) dims.get(1)).intValue(),
              ((Number) dims.get(2)).intValue());
      classes = ((List<?>) state.get("classes")).stream().map(String::valueOf).toList();
    } catch (RuntimeException e) { // a state.json edited or damaged: missing keys, other types
      throw new IOException(
          c.dir().resolve("state.json") + ": no valid 'image' shape and 'classes' list", e);
    }
    return new TrainedCheckpoint(
        c,
        (String) state.get("model"),
        classes,
        shape,
        choice(c, "resize", ResizeMode.SHORTER_SIDE_CROP, ResizeMode.class),
        choice(c, "decoder", ImageDecoder.Kind.OPENCV, ImageDecoder.Kind.class),
        // Checkpoints of data made before the setting: the stored pixels, as their data had them.
        choice(
                c,
                "exif_orientation",
                EtlSettings.ExifOrientationSetting.IGNORE,
                EtlSettings.ExifOrientationSetting.class)
            == EtlSettings.ExifOrientationSetting.APPLY,
        Normalization.fromState(state));
  }

  private static <E extends Enum<E>> E choice(
      Checkpoints.Loaded c, String key, E fallback, Class<E> type) throws IOException {
    Object value = c.state().get(key);
    if (value == null) {
      return fallback; // checkpoints written before the key existed
    }
    for (E constant : type.getEnumConstants()) {
      if (RamtrainConfig.spelling(constant).equals(value)) {
        return constant;
      }
    }
    throw new IOException(c.dir() + "/state.json: unknown " + key + " '" + value + "'");
  }
}
