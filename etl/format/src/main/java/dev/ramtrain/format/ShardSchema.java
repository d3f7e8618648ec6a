package dev.ramtrain.format;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * The Arrow schema of a shard: {@code image} (FixedSizeBinary of H*W*C uint8, HWC), {@code label}
 * (int32), {@code id} (int64, a stable sample id). Schema metadata carries the image shape, layout
 * and class names so a shard is self-describing without its manifest.
 */
public record ShardSchema(ImageShape shape, List<String> classes) implements Serializable {

  public static final String IMAGE = "image";
  public static final String LABEL = "label";
  public static final String ID = "id";
  public static final String LAYOUT = "HWC";
  public static final int FORMAT_VERSION = 1;

  static final String KEY_FORMAT = "ramtrain.format";
  static final String KEY_VERSION = "ramtrain.format.version";
  static final String KEY_HEIGHT = "ramtrain.height";
  static final String KEY_WIDTH = "ramtrain.width";
  static final String KEY_CHANNELS = "ramtrain.channels";
  static final String KEY_LAYOUT = "ramtrain.layout";
  static final String KEY_DTYPE = "ramtrain.dtype";
  static final String KEY_CLASSES = "ramtrain.classes";
  private static final String FORMAT_NAME = "ramtrain-shard";
  private static final ObjectMapper JSON = new ObjectMapper();

  public ShardSchema {
    classes = List.copyOf(classes);
  }

  /** The Arrow schema; metadata is sorted so that equal shards are byte-identical. */
  public Schema toArrow() {
    Map<String, String> meta = new TreeMap<>();
    meta.put(KEY_FORMAT, FORMAT_NAME);
    meta.put(KEY_VERSION, Integer.toString(FORMAT_VERSION));
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
    return new Schema(
        List.of(
            new Field(
                IMAGE, FieldType.notNullable(new ArrowType.FixedSizeBinary(shape.bytes())), null),
            new Field(LABEL, FieldType.notNullable(new ArrowType.Int(32, true)), null),
            new Field(ID, FieldType.notNullable(new ArrowType.Int(64, true)), null)),
        meta);
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
    ShardSchema expected = new ShardSchema(shape, classes);
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
