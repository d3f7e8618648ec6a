package dev.ramtrain.format;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ShardCorruptionTest {
  @TempDir Path tmp;

  private static void assertMessage(Exception e, String... parts) {
    for (String part : parts) {
      assertTrue(
          e.getMessage().contains(part), "'" + e.getMessage() + "' should contain '" + part + "'");
    }
  }

  @Test
  void truncatedShardIsNamed() throws Exception {
    Path file = tmp.resolve("cut.arrow");
    ShardFixtures.write(file, ShardFixtures.SCHEMA, 10, 3);
    byte[] bytes = Files.readAllBytes(file);
    Files.write(file, Arrays.copyOf(bytes, bytes.length - 50));
    var e = assertThrows(ShardFormatException.class, () -> ShardReader.open(file, null));
    assertMessage(e, file.toString(), "truncated");
  }

  @Test
  void checksumMismatchIsNamed() throws Exception {
    Path file = tmp.resolve("flip.arrow");
    ShardStats stats = ShardFixtures.write(file, ShardFixtures.SCHEMA, 10, 3);
    byte[] bytes = Files.readAllBytes(file);
    bytes[bytes.length / 2] ^= 0x40;
    Files.write(file, bytes);
    var e = assertThrows(ShardFormatException.class, () -> ShardReader.open(file, stats.crc32c()));
    assertMessage(e, file.toString(), "checksum mismatch");
  }

  /** A label outside the classes (a tampered shard: the writer refuses one) names the shard. */
  @Test
  void aLabelOutsideTheClassesNamesTheShardAndTheSample() throws Exception {
    Path file = tmp.resolve("labels.arrow");
    ShardSchema five =
        new ShardSchema(ShardFixtures.SCHEMA.shape(), List.of("c0", "c1", "c2", "c3", "c4"));
    try (var out = Files.newOutputStream(file);
        ShardWriter w = new ShardWriter(five, out, 1 << 20)) {
      w.append(11, 1, ShardFixtures.pixels(0, five.shape().bytes()));
      w.append(12, 4, ShardFixtures.pixels(1, five.shape().bytes()));
      w.finish();
    }
    // The same bytes, the class list cut to three (whitespace keeps every length).
    byte[] bytes = Files.readAllBytes(file);
    String text = new String(bytes, java.nio.charset.StandardCharsets.ISO_8859_1);
    String cut = text.replace(",\\\"c3\\\",\\\"c4\\\"]", "]" + " ".repeat(12));
    if (cut.equals(text)) { // stored unescaped
      cut = text.replace(",\"c3\",\"c4\"]", "]" + " ".repeat(10));
    }
    assertNotEquals(text, cut, "the class list is in the shard's metadata");
    Files.write(file, cut.getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
    try (ShardReader reader = ShardReader.open(file, null)) {
      assertEquals(3, reader.schema().classes().size());
      var e = assertThrows(IllegalStateException.class, () -> reader.batch(0));
      assertMessage(e, file.toString(), "row 1 (sample 12) has label 4", "3 classes");
    }
  }

  @Test
  void notAnArrowFile() throws Exception {
    Path file = tmp.resolve("text.arrow");
    Files.writeString(file, "this is not an arrow file, just some text of reasonable length");
    var e = assertThrows(ShardFormatException.class, () -> ShardReader.open(file, null));
    assertMessage(e, file.toString(), "not an Arrow IPC file");
  }

  @Test
  void arrowFileWithAnotherSchemaIsNotAShard() throws Exception {
    Path file = tmp.resolve("other.arrow");
    Schema schema =
        new Schema(
            List.of(new Field("x", FieldType.notNullable(new ArrowType.Int(32, true)), null)));
    writeArrow(file, schema);
    var e = assertThrows(ShardFormatException.class, () -> ShardReader.open(file, null));
    assertMessage(e, file.toString(), "not a ramtrain shard");
  }

  @Test
  void shardFromTheFutureIsRefused() throws Exception {
    Path file = tmp.resolve("future.arrow");
    Schema current = ShardFixtures.SCHEMA.toArrow();
    Map<String, String> meta = new HashMap<>(current.getCustomMetadata());
    meta.put("ramtrain.format.version", "99");
    writeArrow(file, new Schema(current.getFields(), meta));
    var e = assertThrows(ShardFormatException.class, () -> ShardReader.open(file, null));
    assertMessage(e, file.toString(), "version 99", "newer");
  }

  @Test
  void shardWithWrongFieldsIsRefused() throws Exception {
    Path file = tmp.resolve("fields.arrow");
    Schema current = ShardFixtures.SCHEMA.toArrow();
    Schema other =
        new Schema(
            List.of(
                new Field("image", FieldType.notNullable(new ArrowType.FixedSizeBinary(3)), null),
                current.getFields().get(1),
                current.getFields().get(2)),
            current.getCustomMetadata());
    writeArrow(file, other);
    var e = assertThrows(ShardFormatException.class, () -> ShardReader.open(file, null));
    assertMessage(e, file.toString(), "not a shard schema");
  }

  @Test
  void manifestErrorsAreNamed() {
    String name = "/data/x/manifest.json";
    assertMessage(
        assertThrows(
            ShardFormatException.class,
            () -> ManifestCodec.fromJson("{not json".getBytes(StandardCharsets.UTF_8), name)),
        name,
        "not valid JSON");
    assertMessage(
        assertThrows(
            ShardFormatException.class,
            () ->
                ManifestCodec.fromJson(
                    "{\"format\":\"other\"}".getBytes(StandardCharsets.UTF_8), name)),
        name,
        "not a ramtrain dataset manifest");
    assertMessage(
        assertThrows(
            ShardFormatException.class,
            () ->
                ManifestCodec.fromJson(
                    "{\"format\":\"ramtrain-dataset\",\"formatVersion\":7}"
                        .getBytes(StandardCharsets.UTF_8),
                    name)),
        name,
        "version 7",
        "newer");
    assertMessage(
        assertThrows(
            ShardFormatException.class,
            () ->
                ManifestCodec.fromJson(
                    "{\"format\":\"ramtrain-dataset\",\"formatVersion\":1}"
                        .getBytes(StandardCharsets.UTF_8),
                    name)),
        name,
        "malformed");
  }

  private static void writeArrow(Path file, Schema schema) throws Exception {
    try (RootAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator);
        OutputStream out = Files.newOutputStream(file);
        ArrowFileWriter writer = new ArrowFileWriter(root, null, Channels.newChannel(out))) {
      writer.start();
      root.allocateNew();
      if (root.getVector(0) instanceof IntVector v) {
        v.set(0, 1);
      }
      root.setRowCount(1);
      writer.writeBatch();
      writer.end();
    }
  }
}
