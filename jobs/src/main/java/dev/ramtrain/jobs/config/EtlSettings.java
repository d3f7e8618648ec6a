package dev.ramtrain.jobs.config;

import static dev.ramtrain.jobs.config.RamtrainConfig.require;

import dev.ramtrain.etl.image.Augmentation;
import dev.ramtrain.etl.image.ImageDecoder;
import dev.ramtrain.etl.image.ImageStorage;
import dev.ramtrain.etl.image.ImageTransform;
import dev.ramtrain.etl.image.ResizeMode;
import dev.ramtrain.etl.source.CifarSource;
import dev.ramtrain.etl.source.IdxSource;
import dev.ramtrain.etl.source.ImageFolderSource;
import dev.ramtrain.etl.source.ImageSource;
import dev.ramtrain.etl.source.SyntheticImages;
import dev.ramtrain.etl.source.TableSource;
import dev.ramtrain.etl.spark.PreprocessSpec;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.settings.ConfigException;
import java.io.IOException;
import java.nio.file.Files;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/** Turns {@code ramtrain.source.*} and {@code ramtrain.etl.*} settings into the ETL's objects. */
public final class EtlSettings {
  private EtlSettings() {}

  public enum SourceType {
    AUTO,
    IMAGE_FOLDER,
    PARQUET,
    IDX,
    CIFAR10
  }

  public enum Color {
    RGB,
    GRAYSCALE
  }

  /**
   * The generated shapes images that {@code ramtrain.generate.*} describe (classes, images per
   * class, size, JPEG fraction, seed), to be written into {@code root}, which must be a new or
   * empty directory: generate never writes beside files of the user's.
   */
  public static SyntheticImages syntheticImages(RamtrainConfig config, java.nio.file.Path root)
      throws IOException {
    SyntheticImages images;
    try {
      images =
          new SyntheticImages(
              config.integer("ramtrain.generate.classes"),
              config.integer("ramtrain.generate.images-per-class"),
              config.integer("ramtrain.generate.width"),
              config.integer("ramtrain.generate.height"),
              config.number("ramtrain.generate.jpeg-fraction"),
              config.longValue("ramtrain.seed"));
    } catch (IllegalArgumentException e) {
      throw new ConfigException("ramtrain.generate: " + e.getMessage());
    }
    if (Files.isDirectory(root)) {
      try (Stream<java.nio.file.Path> entries = Files.list(root)) {
        if (entries.findAny().isPresent()) {
          throw new ConfigException(
              "ramtrain.generate.output = "
                  + root.toAbsolutePath()
                  + " is not empty: generate writes only into a new or empty directory, so that"
                  + " no file of yours is overwritten");
        }
      }
    }
    return images;
  }

  public static PreprocessSpec preprocessOptions(RamtrainConfig c) {
    int height = c.integer("ramtrain.etl.height");
    int width = c.integer("ramtrain.etl.width");
    require(
        height > 0 && height <= 8192, "ramtrain.etl.height", "must be in [1, 8192], got " + height);
    require(width > 0 && width <= 8192, "ramtrain.etl.width", "must be in [1, 8192], got " + width);
    int channels = c.choice("ramtrain.etl.color", Color.class) == Color.RGB ? 3 : 1;
    var transform =
        new ImageTransform(
            new ImageShape(height, width, channels),
            c.choice("ramtrain.etl.resize", ResizeMode.class),
            augmentation(c));
    ImageLimits limits = imageLimits(c);
    var mode = c.choice("ramtrain.etl.mode", PreprocessSpec.Output.class);
    String output = c.string("ramtrain.etl.output");
    require(
        mode == PreprocessSpec.Output.MEMORY || !output.isBlank(),
        "ramtrain.etl.output",
        "an output directory is required in offline mode (--output DIR)");
    try {
      return new PreprocessSpec(
          transform,
          c.choice("ramtrain.etl.decoder", ImageDecoder.Kind.class),
          limits.maxPixels(),
          limits.maxFileBytes(),
          c.number("ramtrain.etl.val-fraction"),
          c.longValue("ramtrain.seed"),
          c.bytes("ramtrain.etl.shard-target-bytes"),
          c.bytes("ramtrain.etl.batch-target-bytes"),
          c.integer("ramtrain.etl.shards"),
          c.integer("ramtrain.etl.min-shards"),
          c.number("ramtrain.etl.max-reject-fraction"),
          mode,
          output,
          c.bool("ramtrain.etl.overwrite"),
          c.bool("ramtrain.etl.direct-io"),
          c.choice("ramtrain.etl.exif-orientation", ExifOrientationSetting.class)
              == ExifOrientationSetting.APPLY,
          new ImageStorage(
              c.choice("ramtrain.etl.store", ImageStorage.Mode.class),
              c.integer("ramtrain.etl.jpeg-quality")));
    } catch (IllegalArgumentException e) {
      throw new ConfigException(e.getMessage());
    }
  }

  /**
   * What one image may be, for preprocess and predict alike: at most {@code maxPixels} decoded
   * pixels and {@code maxFileBytes} on disk ({@code ramtrain.etl.max-pixels}, {@code
   * .max-file-bytes}).
   */
  public record ImageLimits(long maxPixels, long maxFileBytes) {}

  /** {@code ramtrain.etl.max-pixels} and {@code .max-file-bytes}, each checked here. */
  public static ImageLimits imageLimits(RamtrainConfig c) {
    long pixels = c.longValue("ramtrain.etl.max-pixels");
    require(pixels > 0, "ramtrain.etl.max-pixels", "must be > 0, got " + pixels);
    long bytes = c.bytes("ramtrain.etl.max-file-bytes");
    require(bytes > 0, "ramtrain.etl.max-file-bytes", "must be > 0, got " + bytes);
    return new ImageLimits(pixels, bytes);
  }

  /** {@code ramtrain.etl.exif-orientation}. */
  public enum ExifOrientationSetting {
    APPLY,
    IGNORE
  }

  static Augmentation augmentation(RamtrainConfig c) {
    String p = "ramtrain.etl.augment.";
    return RamtrainConfig.checked(
        "ramtrain.etl.augment",
        () ->
            new Augmentation(
                c.integer(p + "copies"),
                c.bool(p + "keep-original"),
                c.number(p + "scale-min"),
                c.number(p + "scale-max"),
                c.number(p + "ratio-min"),
                c.number(p + "ratio-max"),
                c.number(p + "flip-probability"),
                c.number(p + "rotation-degrees"),
                c.number(p + "brightness"),
                c.number(p + "contrast"),
                c.number(p + "saturation")));
  }

  /** The source named by {@code ramtrain.source.*}, detecting its type from the path if auto. */
  public static ImageSource source(RamtrainConfig c, Configuration hadoop) throws IOException {
    String path = c.string("ramtrain.source.path");
    require(!path.isBlank(), "ramtrain.source.path", "an input is required (--input PATH)");
    SourceType type = c.choice("ramtrain.source.type", SourceType.class);
    if (type == SourceType.AUTO) {
      type = detect(path, hadoop);
    }
    return switch (type) {
      case IMAGE_FOLDER -> new ImageFolderSource(path);
      case PARQUET ->
          new TableSource(
              path,
              c.string("ramtrain.source.image-column"),
              c.string("ramtrain.source.label-column"),
              c.string("ramtrain.source.key-column"));
      case IDX -> new IdxSource(path, c.strings("ramtrain.source.class-names"));
      case CIFAR10 -> new CifarSource(path);
      case AUTO -> throw new IllegalStateException();
    };
  }

  static SourceType detect(String path, Configuration hadoop) throws IOException {
    if (path.startsWith("table:")) {
      return SourceType.PARQUET;
    }
    Path dir = new Path(path);
    FileSystem fs = dir.getFileSystem(hadoop);
    if (!fs.exists(dir)) {
      throw new ConfigException("ramtrain.source.path: " + path + " does not exist");
    }
    if (fs.getFileStatus(dir).isFile()) {
      return path.endsWith(".parquet") ? SourceType.PARQUET : SourceType.IMAGE_FOLDER;
    }
    for (FileStatus status : fs.listStatus(dir)) {
      String name = status.getPath().getName();
      if (name.matches(".+-idx3-ubyte(\\.gz)?")) {
        return SourceType.IDX;
      }
      if (name.matches("data_batch_\\d+\\.bin|test_batch\\.bin")) {
        return SourceType.CIFAR10;
      }
      if (name.endsWith(".parquet")) {
        return SourceType.PARQUET;
      }
    }
    return SourceType.IMAGE_FOLDER;
  }
}
