package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.jobs.config.EtlSettings;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.settings.Spelling;
import dev.ramtrain.trainer.checkpoint.Checkpoints;
import dev.ramtrain.trainer.checkpoint.PretrainedWeights;
import dev.ramtrain.trainer.checkpoint.Safetensors;
import dev.ramtrain.trainer.data.CenterCrop;
import dev.ramtrain.trainer.data.Normalization;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.ParamSpec;
import dev.ramtrain.trainer.nn.Precision;
import dev.ramtrain.trainer.run.ModelChoice;
import dev.ramtrain.trainer.run.ResizeFilter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A checkpoint and what serving it needs from its state.json: model spec, the arithmetic of its
 * GEMM layers, classes, the image shape, resize mode and decoder of the data it was trained on, and
 * the normalization. {@link TrainingRun} writes these, so evaluation, prediction and the plan of a
 * run compute as training did and never guess.
 */
public record TrainedCheckpoint(
    Checkpoints.Loaded loaded,
    String model,
    Precision precision,
    List<String> classes,
    ImageShape shape,
    ResizeMode resize,
    ImageDecoder.Kind decoder,
    boolean exifOrientation,
    Normalization normalization,
    EvalCrop evalCrop) {

  /**
   * How a run trained on random resized crops evaluates: images at the {@code stored} shape it was
   * trained from, resized with {@code filter} and centre-cropped by {@code crop} to the model's
   * input.
   */
  public record EvalCrop(CenterCrop crop, ImageShape stored, ResizeFilter filter) {}

  /**
   * This checkpoint without its tensors: what serving keeps once the weights are on the device, so
   * the heap can let a large model's arrays go.
   */
  public TrainedCheckpoint withoutWeights() {
    Checkpoints.Loaded bare =
        new Checkpoints.Loaded(loaded.dir(), loaded.state(), Map.of(), List.of());
    return new TrainedCheckpoint(
        bare,
        model,
        precision,
        classes,
        shape,
        resize,
        decoder,
        exifOrientation,
        normalization,
        evalCrop);
  }

  /** A checkpoint folder, or a run directory (its latest checkpoint). */
  public static TrainedCheckpoint open(Path checkpointOrRun) throws IOException {
    return open(checkpointOrRun, false);
  }

  /** {@code best}: a run directory's best checkpoint ({@code checkpoints/best}), not its latest. */
  public static TrainedCheckpoint open(Path checkpointOrRun, boolean best) throws IOException {
    return open(checkpointOrRun, best, false);
  }

  /** {@code averaged}: the checkpoint's moving average of the weights ({@code --ema}) instead. */
  public static TrainedCheckpoint open(Path checkpointOrRun, boolean best, boolean averaged)
      throws IOException {
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
    if (averaged) {
      try {
        c = c.averagedAsWeights();
      } catch (IllegalArgumentException e) {
        throw new ConfigException("--ema: " + e.getMessage());
      }
    }
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
        precision(c),
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
        Normalization.fromState(state, c.dir().resolve("state.json")),
        evalCrop(c));
  }

  /** The model's layers as trained, for images of the trained shape; a bad spec names the key. */
  public List<Layer> layers() {
    return ModelChoice.parse("--checkpoint's model", model, shape, precision);
  }

  /**
   * The precision training ran the GEMM layers in: the state's {@code precision}, or in checkpoints
   * written before that key, the recorded {@code ramtrain.train.precision} setting; fp32 in those
   * older still, which trained in nothing else.
   */
  private static Precision precision(Checkpoints.Loaded c) throws IOException {
    Object recorded = c.state().get("precision");
    if (recorded == null && c.state().get("config") instanceof Map<?, ?> config) {
      recorded = config.get("ramtrain.train.precision");
    }
    if (recorded == null) {
      return Precision.FP32;
    }
    for (Precision p : Precision.values()) {
      if (Spelling.of(p).equals(recorded)) {
        return p;
      }
    }
    throw new IOException(c.dir() + "/state.json: unknown precision '" + recorded + "'");
  }

  /**
   * The evaluation resize of a run trained on random resized crops ({@code eval_crop}), or null:
   * its data is evaluated as stored.
   */
  private static EvalCrop evalCrop(Checkpoints.Loaded c) throws IOException {
    Object value = c.state().get("eval_crop");
    if (value == null) {
      return null;
    }
    try {
      Map<?, ?> crop = (Map<?, ?>) value;
      List<?> stored = (List<?>) crop.get("stored");
      return new EvalCrop(
          new CenterCrop(
              ((Number) crop.get("height")).intValue(),
              ((Number) crop.get("width")).intValue(),
              ((Number) crop.get("crop_pct")).doubleValue()),
          new ImageShape(
              ((Number) stored.get(0)).intValue(),
              ((Number) stored.get(1)).intValue(),
              ((Number) stored.get(2)).intValue()),
          filter(String.valueOf(crop.get("filter"))));
    } catch (RuntimeException e) { // edited or damaged: missing keys, other types, bad values
      throw new IOException(
          c.dir().resolve("state.json")
              + ": eval_crop "
              + value
              + " is not {height, width, crop_pct, stored, filter}",
          e);
    }
  }

  /**
   * Pretrained weights served as a checkpoint would be: {@code model} (a timm name) with {@code
   * classes} outputs for images of {@code shape}, the weights matched strictly by name and shape (a
   * ViT's position embedding resampled for another size), ImageNet's normalization, the
   * preprocessing's default resize (shorter side, center crop: an image at the input size passes
   * unchanged) and decoder. The classifier must be the file's own: a fresh head would predict
   * noise.
   */
  public static TrainedCheckpoint fromPretrained(
      Path weights, PretrainedWeights file, String model, List<String> classes, ImageShape shape)
      throws IOException {
    String spec = ModelSpec.withClasses(model, classes.size());
    List<Layer> layers = ModelChoice.parse("--model", spec, shape, Precision.FP32);
    if (file.classes() != classes.size()) {
      throw new IllegalArgumentException(
          weights
              + ": its classifier has "
              + file.classes()
              + " classes where "
              + spec
              + " has "
              + classes.size()
              + ": serving needs the file's own trained head");
    }
    Map<String, float[]> values = file.matchTo(spec, layers);
    Map<String, Safetensors.Tensor> tensors = new LinkedHashMap<>();
    for (Layer layer : layers) {
      for (List<ParamSpec> group : List.of(layer.parameters(), layer.buffers())) {
        for (ParamSpec p : group) {
          long[] dims = Arrays.stream(p.shape()).asLongStream().toArray();
          tensors.put(p.name(), new Safetensors.Tensor(p.name(), dims, values.get(p.name())));
        }
      }
    }
    Map<String, Object> state = new LinkedHashMap<>();
    state.put("model", spec);
    state.put("classes", classes);
    state.put("image", List.of(shape.height(), shape.width(), shape.channels()));
    state.put("mean", List.of(0.485, 0.456, 0.406));
    state.put("std", List.of(0.229, 0.224, 0.225));
    Checkpoints.Loaded loaded =
        new Checkpoints.Loaded(weights.toAbsolutePath(), state, tensors, List.of());
    return new TrainedCheckpoint(
        loaded,
        spec,
        Precision.FP32,
        classes,
        shape,
        ResizeMode.SHORTER_SIDE_CROP,
        ImageDecoder.Kind.OPENCV,
        true,
        Normalization.fromState(state),
        null);
  }

  private static ResizeFilter filter(String spelling) {
    for (ResizeFilter f : ResizeFilter.values()) {
      if (Spelling.of(f).equals(spelling)) {
        return f;
      }
    }
    throw new IllegalArgumentException("unknown filter " + spelling);
  }

  private static <E extends Enum<E>> E choice(
      Checkpoints.Loaded c, String key, E fallback, Class<E> type) throws IOException {
    Object value = c.state().get(key);
    if (value == null) {
      return fallback; // checkpoints written before the key existed
    }
    for (E constant : type.getEnumConstants()) {
      if (Spelling.of(constant).equals(value)) {
        return constant;
      }
    }
    throw new IOException(c.dir() + "/state.json: unknown " + key + " '" + value + "'");
  }
}
