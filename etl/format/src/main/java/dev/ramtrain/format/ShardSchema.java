package dev.ramtrain.format;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * The Arrow schema of a shard: {@code image}, {@code label} (int32), {@code id} (int64, a stable
 * sample id). Schema metadata carries the image shape, layout and class names so a shard is
 * self-describing without its manifest.
 *
 * <p>The image column holds either {@link Storage#PIXELS} (FixedSizeBinary of H*W*C uint8, HWC:
 * mapped and read in place) or {@link Storage#ENCODED} (variable-length Binary, with a fourth
 * column {@code encoding} (int8) saying per row whether the bytes are {@link #RAW_ROW} pixels of
 * the shape or a {@link #JPEG_ROW} that decodes to it): a fifth of the bytes for photos, decoded by
 * the loader. Encoded shards are format version 2, so a ramtrain that cannot decode them says so
 * instead of misreading them.
 */
public record ShardSchema(ImageShape shape, List<String> classes, Storage storage)
    implements Serializable {

  public static final String IMAGE = "image";
  public static final String LABEL = "label";
  public static final String ID = "id";
  public static final String ENCODING = "encoding";
  public static final String LAYOUT = "HWC";
  public static final int FORMAT_VERSION = 2;

  /** An encoded shard's row of H*W*C pixels, as in a pixel shard. */
  public static final byte RAW_ROW = 0;

  /** An encoded shard's row of JPEG bytes decoding to the shard's shape. */
  public static final byte JPEG_ROW = 1;

  /** How the image column holds a row's image. */
  public enum Storage {
    PIXELS,
    ENCODED;

    /** The shard format version that introduced this storage: what its shards are written as. */
    int version() {
      return this == PIXELS ? 1 : 2;
    }
  }

  static final String KEY_FORMAT = "ramtrain.format";
  static final String KEY_VERSION = "ramtrain.format.version";
  static final String KEY_HEIGHT = "ramtrain.height";
  static final String KEY_WIDTH = "ramtrain.width";
  static final String KEY_CHANNELS = "ramtrain.channels";
  static final String KEY_LAYOUT = "ramtrain.layout";
  static final String KEY_DTYPE = "ramtrain.dtype";
  static final String KEY_CLASSES = "ramtrain.classes";
  static final String KEY_STORAGE = "ramtrain.storage";
  private static final String FORMAT_NAME = "ramtrain-shard";
  private static final ObjectMapper JSON = new ObjectMapper();

  public ShardSchema {
    classes = List.copyOf(classes);
    if (storage == null) {
      throw new IllegalArgumentException("storage is required");
    }
  }

  /** A shard of pixels, as every shard was before encoded ones. */
  public ShardSchema(ImageShape shape, List<String> classes) {
    this(shape, classes, Storage.PIXELS);
  }

  public boolean encoded() {
    return storage == Storage.ENCODED;
  }

  /** The Arrow schema; metadata is sorted so that equal shards are byte-identical. */
  public Schema toArrow() {
    Map<String, String> meta = new TreeMap<>();
    meta.put(KEY_FORMAT, FORMAT_NAME);
    // Pixel shards stay version 1, byte for byte what earlier releases wrote and read.
    meta.put(KEY_VERSION, Integer.toString(storage.version()));
    if (encoded()) {
      meta.put(KEY_STORAGE, "encoded");
    }
    meta.put(KEY_HEIGHT, Integer.toString(shape.height()));
    meta.put(KEY_WIDTH, Integer.toString(shape.width()));
    meta.put(KEY_CHANNELS, Integer.toString(shape.channels()));
    meta.put(KEY_LAYOUT, LAYOUT);
    meta.put(KEY_DTYPE, "uint8");
    try {
      meta.put(KEY_CLASSES, JSON.writeValueAsString(classes));
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
    ArrowType image =
        encoded() ? new ArrowType.Binary() : new ArrowType.FixedSizeBinary(shape.bytes());
    List<Field> fields =
        new ArrayList<>(
            List.of(
                new Field(IMAGE, FieldType.notNullable(image), null),
                new Field(LABEL, FieldType.notNullable(new ArrowType.Int(32, true)), null),
                new Field(ID, FieldType.notNullable(new ArrowType.Int(64, true)), null)));
    if (encoded()) {
      fields.add(new Field(ENCODING, FieldType.notNullable(new ArrowType.Int(8, true)), null));
    }
    return new Schema(fields, meta);
  }

  /** Reads and checks a shard's schema; {@code file} names the shard in errors. */
  public static ShardSchema fromArrow(Schema schema, String file) throws ShardFormatException {
    Map<String, String> meta = schema.getCustomMetadata();
    if (meta == null || !FORMAT_NAME.equals(meta.get(KEY_FORMAT))) {
      throw new ShardFormatException(
          file,
          "not a ramtrain shard (schema metadata lacks " + KEY_FORMAT + "=" + FORMAT_NAME + ")");
    }
    int version = intMeta(meta, KEY_VERSION, file);
    if (version > FORMAT_VERSION) {
      throw new ShardFormatException(
          file,
          "shard format version "
              + version
              + " is newer than this ramtrain understands ("
              + FORMAT_VERSION
              + "); upgrade ramtrain");
    }
    if (!LAYOUT.equals(meta.get(KEY_LAYOUT)) || !"uint8".equals(meta.get(KEY_DTYPE))) {
      throw new ShardFormatException(
          file, "unsupported layout/dtype " + meta.get(KEY_LAYOUT) + "/" + meta.get(KEY_DTYPE));
    }
    ImageShape shape;
    try {
      shape =
          new ImageShape(
              intMeta(meta, KEY_HEIGHT, file),
              intMeta(meta, KEY_WIDTH, file),
              intMeta(meta, KEY_CHANNELS, file));
    } catch (IllegalArgumentException e) {
      throw new ShardFormatException(file, "bad image shape in schema metadata: " + e.getMessage());
    }
    List<String> classes;
    try {
      classes = JSON.readValue(meta.getOrDefault(KEY_CLASSES, "[]"), new TypeReference<>() {});
    } catch (JsonProcessingException e) {
      throw new ShardFormatException(file, "bad class list in schema metadata", e);
    }
    String storageName = meta.getOrDefault(KEY_STORAGE, "pixels");
    Storage storage =
        switch (storageName) {
          case "pixels" -> Storage.PIXELS;
          case "encoded" -> Storage.ENCODED;
          default ->
              throw new ShardFormatException(
                  file, "unknown image storage " + storageName + " in schema metadata");
        };
    ShardSchema expected = new ShardSchema(shape, classes, storage);
    if (!expected.toArrow().getFields().equals(schema.getFields())) {
      throw new ShardFormatException(
          file,
          "schema is not a shard schema: expected "
              + expected.toArrow().getFields()
              + " but found "
              + schema.getFields());
    }
    return expected;
  }

  private static int intMeta(Map<String, String> meta, String key, String file)
      throws ShardFormatException {
    String value = meta.get(key);
    try {
      return Integer.parseInt(value);
    } catch (NumberFormatException e) {
      throw new ShardFormatException(
          file, "schema metadata " + key + " is not an integer: " + value);
    }
  }
}
