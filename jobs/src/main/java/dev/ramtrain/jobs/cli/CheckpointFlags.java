package dev.ramtrain.jobs.cli;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.jobs.train.TrainedCheckpoint;
import dev.ramtrain.settings.ConfigException;
import dev.ramtrain.trainer.checkpoint.PretrainedWeights;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import picocli.CommandLine.Option;

/**
 * What the commands that serve a model serve: a checkpoint ({@code --checkpoint}), or pretrained
 * weights of a named architecture ({@code --model} with {@code --weights}), as timm serves them.
 */
public final class CheckpointFlags {
  @Option(
      names = {"-c", "--checkpoint"},
      paramLabel = "DIR",
      description = "A checkpoint folder, or a run directory (its latest checkpoint).")
  Path checkpoint;

  @Option(
      names = "--model",
      description =
          "Without --checkpoint: the architecture of --weights, a timm name such as resnet50 or"
              + " vit_base_patch16_224.")
  String model;

  @Option(
      names = "--weights",
      paramLabel = "FILE",
      description =
          "Without --checkpoint: pretrained weights (a timm or torchvision model.safetensors),"
              + " with their ImageNet normalization.")
  Path weights;

  @Option(
      names = "--best",
      description =
          "With a run directory: its best checkpoint by the run's best-metric"
              + " (checkpoints/best), not the latest.")
  boolean best;

  @Option(
      names = "--ema",
      description =
          "With --checkpoint: the weights' moving average (model_ema.safetensors of a run trained"
              + " with --ema), not the weights.")
  boolean ema;

  /** Whether pretrained weights are served, not a checkpoint; a usage error for a mix. */
  boolean pretrained() {
    if (checkpoint != null && (model != null || weights != null)) {
      throw new ConfigException("--checkpoint, or --model with --weights: not both");
    }
    if (ema && checkpoint == null) {
      throw new ConfigException(
          "--ema serves a checkpoint's moving average: it needs --checkpoint");
    }
    if (checkpoint == null && (model == null || weights == null)) {
      throw new ConfigException("needs --checkpoint DIR, or --model NAME with --weights FILE");
    }
    return checkpoint == null;
  }

  /** The checkpoint given. */
  TrainedCheckpoint open() throws IOException {
    return TrainedCheckpoint.open(checkpoint, best, ema);
  }

  /** The weights file given, read once: its head says the class count where none is given. */
  PretrainedWeights readWeights() throws IOException {
    return PretrainedWeights.read(weights);
  }

  /** {@code file} (the weights given) with {@code classes} outputs for images of {@code shape}. */
  TrainedCheckpoint openPretrained(PretrainedWeights file, List<String> classes, ImageShape shape)
      throws IOException {
    return TrainedCheckpoint.fromPretrained(weights, file, model, classes, shape);
  }
}
