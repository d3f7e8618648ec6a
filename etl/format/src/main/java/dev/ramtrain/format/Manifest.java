package dev.ramtrain.format;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The dataset manifest ({@code manifest.json}): published last, by an atomic rename, so a dataset
 * without one is not a dataset. Shard files are relative to the dataset directory.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record Manifest(
    String format,
    int formatVersion,
    String createdBy,
    Image image,
    List<String> classes,
    Map<String, Split> splits,
    Source source,
    Map<String, Object> transforms,
    long seed,
    Rejects rejects)
    implements Serializable {

  public static final String FORMAT = "ramtrain-dataset";
  public static final int VERSION = 1;
  public static final String TRAIN = "train";
  public static final String VAL = "val";

  public Manifest {
    classes = List.copyOf(classes);
    splits = Map.copyOf(splits);
  }

  public ShardSchema shardSchema() {
    return new ShardSchema(image.shape(), classes, image.shardStorage());
  }

  /**
   * This manifest with every file it names (shards, rejects list) moved under {@code folder}: how a
   * commit points the manifest into its version folder.
   */
  public Manifest inFolder(String folder) {
    Map<String, Split> moved = new LinkedHashMap<>();
    splits.forEach(
        (name, split) -> {
          List<Shard> shards = new ArrayList<>();
          for (Shard s : split.shards()) {
            shards.add(
                new Shard(
                    folder + "/" + s.file(), s.rows(), s.bytes(), s.crc32c(), s.classCounts()));
          }
          moved.put(name, new Split(split.rows(), split.bytes(), split.classCounts(), shards));
        });
    Rejects r =
        rejects == null || rejects.file() == null
            ? rejects
            : new Rejects(
                rejects.count(),
                rejects.inputs(),
                rejects.byReason(),
                folder + "/" + rejects.file());
    return new Manifest(
        format, formatVersion, createdBy, image, classes, moved, source, transforms, seed, r);
  }

  /**
   * Every file this manifest names, relative to the dataset directory: shards, then the rejects
   * list.
   */
  public List<String> files() {
    List<String> files = new ArrayList<>();
    new java.util.TreeMap<>(splits)
        .values()
        .forEach(split -> split.shards().forEach(s -> files.add(s.file())));
    if (rejects != null && rejects.file() != null) {
      files.add(rejects.file());
    }
    return files;
  }

  public Split split(String name) {
    Split split = splits.get(name);
    if (split == null) {
      throw new IllegalArgumentException(
          "dataset has no split '"
              + name
              + "' (it has "
              + new java.util.TreeSet<>(splits.keySet())
              + ")");
    }
    return split;
  }

  /**
   * Image shape and encoding of every row, and how the shards store them: {@code storage} null (as
   * every manifest before it was written) for pixels, else the {@code preprocess --store} mode that
   * wrote encoded shards ({@link #STORE_JPEG}, {@link #STORE_AUTO}).
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public record Image(
      int height, int width, int channels, String layout, String dtype, String storage)
      implements Serializable {
    public static final String STORE_RAW = "raw";
    public static final String STORE_JPEG = "jpeg";
    public static final String STORE_AUTO = "auto";

    public Image {
      if (STORE_RAW.equals(storage)) {
        storage = null; // one spelling of pixels, so that manifests stay as they were
      }
      if (storage != null && !STORE_JPEG.equals(storage) && !STORE_AUTO.equals(storage)) {
        throw new IllegalArgumentException(
            "image storage '" + storage + "' is none of raw, jpeg, auto");
      }
    }

    public static Image of(ImageShape shape) {
      return of(shape, STORE_RAW);
    }

    public static Image of(ImageShape shape, String storage) {
      return new Image(
          shape.height(), shape.width(), shape.channels(), ShardSchema.LAYOUT, "uint8", storage);
    }

    public ImageShape shape() {
      return new ImageShape(height, width, channels);
    }

    /** The store mode that wrote the shards: raw, jpeg or auto. */
    public String store() {
      return storage == null ? STORE_RAW : storage;
    }

    ShardSchema.Storage shardStorage() {
      return storage == null ? ShardSchema.Storage.PIXELS : ShardSchema.Storage.ENCODED;
    }
  }

  public record Split(long rows, long bytes, List<Long> classCounts, List<Shard> shards)
      implements Serializable {
    public Split {
      classCounts = List.copyOf(classCounts);
      shards = List.copyOf(shards);
    }
  }

  /** One shard: its path relative to the dataset directory and its CRC32C as 8 hex digits. */
  public record Shard(String file, long rows, long bytes, String crc32c, List<Long> classCounts)
      implements Serializable {
    public Shard {
      classCounts = List.copyOf(classCounts);
    }

    public static Shard of(String file, ShardStats stats) {
      return new Shard(
          file,
          stats.rows(),
          stats.bytes(),
          String.format("%08x", stats.crc32c()),
          stats.classCounts());
    }

    public long crc32cValue() {
      return Long.parseLong(crc32c, 16);
    }
  }

  public record Source(String type, String path, Map<String, String> options)
      implements Serializable {}

  /** How many inputs were rejected and why; the list itself is in {@code file}. */
  public record Rejects(long count, long inputs, Map<String, Long> byReason, String file)
      implements Serializable {}
}
