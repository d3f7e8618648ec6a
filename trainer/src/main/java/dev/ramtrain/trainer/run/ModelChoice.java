package dev.ramtrain.trainer.run;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.checkpoint.PretrainedWeights;
import dev.ramtrain.trainer.nn.Layer;
import dev.ramtrain.trainer.nn.ModelBlueprint;
import dev.ramtrain.trainer.nn.ModelSpec;
import dev.ramtrain.trainer.nn.Precision;
import dev.ramtrain.trainer.optim.EmaDecay;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * Which model a run trains, as its settings describe it: the model spec ({@code
 * ramtrain.train.model}), the seed of its initial weights, the GEMM layers' arithmetic ({@code
 * ramtrain.train.precision}), the pretrained weights it starts from ({@code
 * ramtrain.train.weights}: a timm or torchvision safetensors file; empty: none), timm's drop path
 * rate and the decay of the weights' moving average ({@code --ema}, 0 for none) and whether it is
 * warmed up ({@code ramtrain.train.ema-warmup}). Part of the run's description; builds the {@link
 * ModelBlueprint} the trainer binds.
 */
public record ModelChoice(
    String spec,
    long seed,
    Precision precision,
    String weights,
    float dropPath,
    float ema,
    boolean emaWarmup)
    implements Serializable {
  private static final String KEY = "ramtrain.train.model";

  public ModelChoice(String spec, long seed, Precision precision) {
    this(spec, seed, precision, "", 0f, 0f, false);
  }

  /** The moving average's decay schedule; {@link #ema} 0 keeps none. */
  public EmaDecay emaDecay() {
    return new EmaDecay(ema, emaWarmup);
  }

  /**
   * The layers for images of {@code shape}, unbound, as training builds them (precision, drop
   * path); a bad spec is a usage error.
   */
  public List<Layer> layers(ImageShape shape) {
    return parse(KEY, spec, shape, precision, dropPath);
  }

  /** What the trainer builds: this model for images of {@code shape}, up to {@code maxBatch}. */
  public ModelBlueprint blueprint(ImageShape shape, int maxBatch) {
    List<Layer> layers = layers(shape); // a bad spec fails here, not later inside the trainer
    ModelBlueprint blueprint = ModelBlueprint.of(spec, shape, maxBatch, seed, precision, dropPath);
    if (weights.isEmpty()) {
      return blueprint;
    }
    return blueprint.withPretrained(pretrained(layers));
  }

  /**
   * The weights file's values for {@code layers}, matched by name and shape; a file that cannot be
   * read or does not fit is an error naming it and everything that does not fit (exit 1).
   */
  private Map<String, float[]> pretrained(List<Layer> layers) {
    try {
      return PretrainedWeights.read(Path.of(weights)).matchTo(spec, layers);
    } catch (IOException e) {
      throw new UncheckedIOException("ramtrain.train.weights: " + e.getMessage(), e);
    }
  }

  /**
   * Fails, naming the key, unless the model takes images of {@code shape} and has one output per
   * class: checked before anything is allocated, instead of failing in the first step.
   */
  public void requireFits(ImageShape shape, List<String> classes) {
    List<Layer> layers = layers(shape);
    int in = layers.get(0).inputSize();
    int out = layers.get(layers.size() - 1).outputSize();
    if (in != shape.bytes()) {
      throw new ConfigException(
          String.format(
              "%s = '%s' takes %d values per sample; the dataset's images are %dx%dx%d = %d: %s"
                  + " fits them",
              KEY,
              spec,
              in,
              shape.height(),
              shape.width(),
              shape.channels(),
              shape.bytes(),
              suggestion(shape, classes.size())));
    }
    if (out != classes.size()) {
      String fixed = spec.replaceFirst("-\\d+$", "-" + classes.size());
      throw new ConfigException(
          String.format(
              "%s = '%s' has %d outputs; the dataset has %d classes (%s)%s",
              KEY,
              spec,
              out,
              classes.size(),
              String.join(", ", classes),
              fixed.equals(spec) ? "" : ": --model " + fixed + " has as many"));
    }
  }

  /**
   * A model of the spec language for images of {@code shape} with {@code classes} outputs, said
   * where the chosen one does not fit (the default is Fashion-MNIST's MLP): CIFAR's ResNet-20 for
   * small images or one channel, timm's ResNet-18 (which takes pretrained weights) for larger RGB.
   */
  static String suggestion(ImageShape shape, int classes) {
    if (shape.channels() == 3 && Math.min(shape.height(), shape.width()) >= 96) {
      return "--model resnet18 (timm's ResNet-18; --weights FILE fine-tunes pretrained weights)";
    }
    return "--model resnet:20-" + classes + " (a CIFAR ResNet-20)";
  }

  /**
   * Parses a model spec, its GEMM layers in {@code precision}; a bad one is a usage error naming
   * {@code key}.
   */
  public static List<Layer> parse(String key, String spec, ImageShape shape, Precision precision) {
    return parse(key, spec, shape, precision, 0f);
  }

  private static List<Layer> parse(
      String key, String spec, ImageShape shape, Precision precision, float dropPath) {
    try {
      return ModelSpec.parse(spec, shape, precision, dropPath);
    } catch (IllegalArgumentException e) {
      throw new ConfigException(key + " = '" + spec + "': " + e.getMessage());
    }
  }
}
