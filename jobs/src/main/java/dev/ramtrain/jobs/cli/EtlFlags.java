package dev.ramtrain.jobs.cli;

import java.util.Map;
import picocli.CommandLine.Option;

/**
 * The flags of {@code preprocess} and {@code pipeline} that say how the raw images are prepared.
 */
public final class EtlFlags {
  @Option(
      names = {"-i", "--input"},
      paramLabel = "PATH",
      description = "Raw dataset (ramtrain.source.path).")
  String input;

  @Option(
      names = "--source-type",
      description = "auto, image-folder, parquet, idx, cifar10 (ramtrain.source.type).")
  String sourceType;

  @Option(names = "--height", description = "Output height (ramtrain.etl.height).")
  Integer height;

  @Option(names = "--width", description = "Output width (ramtrain.etl.width).")
  Integer width;

  @Option(names = "--color", description = "rgb or grayscale (ramtrain.etl.color).")
  String color;

  @Option(
      names = "--resize",
      description = "shorter-side-crop, stretch, letterbox (ramtrain.etl.resize).")
  String resize;

  @Option(
      names = "--copies",
      description = "Augmented copies per sample (ramtrain.etl.augment.copies).")
  Integer copies;

  @Option(names = "--val-fraction", description = "Val split fraction (ramtrain.etl.val-fraction).")
  Double valFraction;

  @Option(names = "--decoder", description = "opencv or imageio (ramtrain.etl.decoder).")
  String decoder;

  @Option(
      names = "--store",
      description = "How shards hold images: raw, jpeg or auto (ramtrain.etl.store).")
  String store;

  @Option(
      names = "--jpeg-quality",
      description = "Quality of the JPEGs --store writes (ramtrain.etl.jpeg-quality).")
  Integer jpegQuality;

  /** Adds the flags given to {@code f} (full key to text). */
  void addTo(Map<String, String> f) {
    f.put("ramtrain.source.path", input);
    f.put("ramtrain.source.type", sourceType);
    f.put("ramtrain.etl.height", CommonFlags.text(height));
    f.put("ramtrain.etl.width", CommonFlags.text(width));
    f.put("ramtrain.etl.color", color);
    f.put("ramtrain.etl.resize", resize);
    f.put("ramtrain.etl.augment.copies", CommonFlags.text(copies));
    f.put("ramtrain.etl.val-fraction", CommonFlags.text(valFraction));
    f.put("ramtrain.etl.decoder", decoder);
    f.put("ramtrain.etl.store", store);
    f.put("ramtrain.etl.jpeg-quality", CommonFlags.text(jpegQuality));
  }
}
