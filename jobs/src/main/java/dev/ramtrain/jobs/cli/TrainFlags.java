package dev.ramtrain.jobs.cli;

import java.util.Map;
import picocli.CommandLine.Option;

/** The flags of {@code train} and {@code pipeline} that say what is trained, how, and where to. */
public final class TrainFlags {
  @Option(
      names = {"-o", "--output"},
      paramLabel = "DIR",
      description = "Run directory (ramtrain.train.output).")
  String output;

  @Option(
      names = "--model",
      description = "Model spec, e.g. mlp:784-1024-1024-10 (ramtrain.train.model).")
  String model;

  @Option(
      names = "--weights",
      paramLabel = "FILE",
      description =
          "Pretrained weights, a timm or torchvision state dict (model.safetensors), loaded"
              + " strictly; a classifier of another class count starts fresh"
              + " (ramtrain.train.weights).")
  String weights;

  @Option(names = "--epochs", description = "Epochs (ramtrain.train.epochs).")
  Integer epochs;

  @Option(names = "--batch-size", description = "Batch size (ramtrain.train.batch-size).")
  Integer batchSize;

  @Option(
      names = "--accumulate",
      paramLabel = "N",
      description =
          "Gradient accumulation: N batches per optimizer step, as one batch N times larger"
              + " (ramtrain.train.accumulate).")
  Integer accumulate;

  @Option(
      names = "--best-metric",
      description =
          "val-loss or val-acc: the metric naming the best epoch's checkpoint"
              + " (ramtrain.train.best-metric).")
  String bestMetric;

  @Option(
      names = "--early-stop-patience",
      paramLabel = "EPOCHS",
      description =
          "Stop when the best metric has not improved for this many epochs; 0: never"
              + " (ramtrain.train.early-stop-patience).")
  Integer earlyStopPatience;

  @Option(
      names = "--augment",
      description =
          "none or rrc: a random resized crop of each stored image, drawn anew every epoch"
              + " (ramtrain.train.augment.mode).")
  String augment;

  @Option(names = "--optimizer", description = "adamw or sgd (ramtrain.train.optimizer).")
  String optimizer;

  @Option(names = "--lr", description = "Learning rate (ramtrain.train.lr).")
  Double lr;

  @Option(
      names = "--weight-decay",
      description = "Decoupled weight decay, AdamW's (ramtrain.train.weight-decay).")
  Double weightDecay;

  @Option(
      names = "--layer-decay",
      description =
          "Layer-wise learning-rate decay by timm's groups (ViT, ConvNeXt, ResNet): block i of n"
              + " at lr * decay^(n - i); 1: off (ramtrain.train.layer-decay).")
  Double layerDecay;

  @Option(
      names = "--freeze",
      paramLabel = "PATTERN",
      description =
          "Parameters not trained, a regular expression over their names, e.g. '(?!head\\.).*'"
              + " for a linear probe (ramtrain.train.freeze).")
  String freeze;

  @Option(
      names = "--warmup-epochs",
      description = "Linear learning-rate warm-up (ramtrain.train.warmup-epochs).")
  Integer warmupEpochs;

  @Option(
      names = "--drop-path",
      paramLabel = "RATE",
      description =
          "Stochastic depth of a ViT's blocks, rising linearly over depth to RATE"
              + " (ramtrain.train.drop-path).")
  Double dropPath;

  @Option(
      names = "--ema",
      paramLabel = "DECAY",
      description =
          "Keep an exponential moving average of the weights (timm's --model-ema-decay, e.g."
              + " 0.9998), evaluated each epoch and checkpointed beside them; 0 = off"
              + " (ramtrain.train.ema).")
  Double ema;

  @Option(
      names = "--schedule",
      description =
          "Learning-rate schedule: constant, step, cosine or one-cycle (ramtrain.train.schedule).")
  String schedule;

  @Option(
      names = "--clip-norm",
      description = "Clip the gradient norm to this; 0: off (ramtrain.train.clip-norm).")
  Double clipNorm;

  @Option(
      names = "--color-jitter",
      paramLabel = "STRENGTH",
      description =
          "Colour jitter on the device, timm's --color-jitter; 0: off"
              + " (ramtrain.train.color-jitter).")
  Double colorJitter;

  @Option(
      names = "--mixup",
      paramLabel = "ALPHA",
      description = "Mixup's Beta alpha, timm's --mixup; 0: off (ramtrain.train.mixup).")
  Double mixup;

  @Option(
      names = "--cutmix",
      paramLabel = "ALPHA",
      description = "CutMix's Beta alpha, timm's --cutmix; 0: off (ramtrain.train.cutmix).")
  Double cutmix;

  @Option(
      names = "--label-smoothing",
      description = "Label smoothing of the cross-entropy loss (ramtrain.train.label-smoothing).")
  Double labelSmoothing;

  @Option(
      names = "--precision",
      description = "fp32 or bf16 (autocast-style mixed precision) (ramtrain.train.precision).")
  String precision;

  @Option(names = "--workers", description = "Data-loader worker threads (ramtrain.train.workers).")
  Integer workers;

  @Option(
      names = "--prefetch",
      description = "Batches the loader prepares ahead (ramtrain.train.prefetch).")
  Integer prefetch;

  @Option(
      names = "--ranks",
      description =
          "Data-parallel ranks, one trainer task each in a Spark barrier stage; --batch-size is"
              + " the global batch (ramtrain.dist.ranks; on a cluster one per executor by"
              + " default).")
  Integer ranks;

  @Option(
      names = "--offload",
      paramLabel = "MODE",
      description =
          "auto (offload when resident does not fit the budget), on or off"
              + " (ramtrain.offload.mode).")
  String offload;

  @Option(
      names = "--device-budget",
      paramLabel = "SIZE",
      description = "Device memory budget, e.g. 6GiB (ramtrain.offload.budget).")
  String deviceBudget;

  @Option(
      names = "--overwrite",
      description =
          "Replace the run in --output; it is deleted once the new run has saved its first"
              + " checkpoint (ramtrain.train.overwrite).")
  Boolean overwrite;

  /** Adds the flags given to {@code f} (full key to text). */
  void addTo(Map<String, String> f) {
    f.put("ramtrain.train.output", output);
    f.put("ramtrain.train.model", model);
    f.put("ramtrain.train.weights", weights);
    f.put("ramtrain.train.epochs", CommonFlags.text(epochs));
    f.put("ramtrain.train.batch-size", CommonFlags.text(batchSize));
    f.put("ramtrain.train.accumulate", CommonFlags.text(accumulate));
    f.put("ramtrain.train.best-metric", bestMetric);
    f.put("ramtrain.train.early-stop-patience", CommonFlags.text(earlyStopPatience));
    f.put("ramtrain.train.augment.mode", augment);
    f.put("ramtrain.train.optimizer", optimizer);
    f.put("ramtrain.train.lr", CommonFlags.text(lr));
    f.put("ramtrain.train.weight-decay", CommonFlags.text(weightDecay));
    f.put("ramtrain.train.schedule", schedule);
    f.put("ramtrain.train.layer-decay", CommonFlags.text(layerDecay));
    f.put("ramtrain.train.freeze", freeze);
    f.put("ramtrain.train.warmup-epochs", CommonFlags.text(warmupEpochs));
    f.put("ramtrain.train.drop-path", CommonFlags.text(dropPath));
    f.put("ramtrain.train.ema", CommonFlags.text(ema));
    f.put("ramtrain.train.clip-norm", CommonFlags.text(clipNorm));
    f.put("ramtrain.train.label-smoothing", CommonFlags.text(labelSmoothing));
    f.put("ramtrain.train.color-jitter", CommonFlags.text(colorJitter));
    f.put("ramtrain.train.mixup", CommonFlags.text(mixup));
    f.put("ramtrain.train.cutmix", CommonFlags.text(cutmix));
    f.put("ramtrain.train.precision", precision);
    f.put("ramtrain.train.workers", CommonFlags.text(workers));
    f.put("ramtrain.train.prefetch", CommonFlags.text(prefetch));
    f.put("ramtrain.dist.ranks", CommonFlags.text(ranks));
    f.put("ramtrain.offload.mode", offload);
    f.put("ramtrain.offload.budget", deviceBudget);
    f.put("ramtrain.train.overwrite", CommonFlags.text(overwrite));
  }
}
