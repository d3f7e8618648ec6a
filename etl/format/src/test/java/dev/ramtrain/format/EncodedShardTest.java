package dev.ramtrain.format;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Shards whose image column holds encoded rows: round trip, and what the reader refuses. */
class EncodedShardTest {
  private static final ShardSchema ENCODED =
      new ShardSchema(
          ShardFixtures.SCHEMA.shape(),
          ShardFixtures.SCHEMA.classes(),
          ShardSchema.Storage.ENCODED);

  @TempDir Path tmp;

  /** Stand-in JPEG bytes: the format does not decode them, only carries them. */
  private static byte[] jpeg(int row) {
    byte[] b = new byte[3 + row * 5];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) (row * 13 + i);
    }
    return b;
  }

  @Test
  void pixelAndJpegRowsComeBackAcrossBatchesCutByBytes() throws Exception {
    Path file = tmp.resolve("e.arrow");
    int pixels = ENCODED.shape().bytes();
    ShardStats stats;
    // 300 bytes a batch: a batch ends before the row that would overfill it.
    try (OutputStream out = Files.newOutputStream(file);
        ShardWriter writer = new ShardWriter(ENCODED, out, 300)) {
      for (int r = 0; r < 20; r++) {
        if (r % 3 == 0) {
          writer.append(
              ShardFixtures.id(r), ShardFixtures.label(r), ShardFixtures.pixels(r, pixels));
        } else {
          writer.appendJpeg(ShardFixtures.id(r), ShardFixtures.label(r), jpeg(r));
        }
      }
      stats = writer.finish();
    }
    try (ShardReader reader = ShardReader.open(file, stats.crc32c())) {
      assertEquals(ENCODED, reader.schema());
      assertEquals(20, reader.rowCount());
      assertTrue(reader.batchCount() > 1, "cut by bytes: " + reader.batchCount());
      int row = 0;
      for (int b = 0; b < reader.batchCount(); b++) {
        try (ShardBatch batch = reader.batch(b)) {
          long bytes = 0;
          for (int r = 0; r < batch.rowCount(); r++, row++) {
            boolean isJpeg = row % 3 != 0;
            assertEquals(isJpeg, batch.isJpeg(r), "row " + row);
            byte[] expected = isJpeg ? jpeg(row) : ShardFixtures.pixels(row, pixels);
            assertArrayEquals(expected, batch.image(r), "row " + row);
            assertEquals(expected.length, batch.imageLength(r));
            assertEquals(ShardFixtures.label(row), batch.label(r));
            assertEquals(ShardFixtures.id(row), batch.id(r));
            bytes += expected.length;
          }
          assertTrue(batch.rowCount() == 1 || bytes <= 300, "batch " + b + " holds " + bytes);
        }
      }
      assertEquals(20, row);
    }
  }

  @Test
  void pixelShardsStayVersionOneAndEncodedOnesAreVersionTwo() {
    assertEquals(
        "1", ShardFixtures.SCHEMA.toArrow().getCustomMetadata().get("ramtrain.format.version"));
    assertEquals("2", ENCODED.toArrow().getCustomMetadata().get("ramtrain.format.version"));
    assertFalse(ShardFixtures.SCHEMA.toArrow().getCustomMetadata().containsKey("ramtrain.storage"));
  }

  @Test
  void aPixelShardTakesNoJpeg() throws Exception {
    try (ShardWriter writer =
        new ShardWriter(ShardFixtures.SCHEMA, OutputStream.nullOutputStream(), 1000)) {
      assertThrows(IllegalStateException.class, () -> writer.appendJpeg(1, 0, jpeg(1)));
    }
  }

  @Test
  void offsetsThatGoBackAreRefusedWhenOpened() throws Exception {
    Path file = tmp.resolve("back.arrow");
    write(file, new int[] {0, 10, 5, 20}, new byte[] {1, 1, 1});
    var e = assertThrows(ShardFormatException.class, () -> ShardReader.open(file, null));
    assertTrue(e.getMessage().contains(file.toString()), e.getMessage());
    assertTrue(e.getMessage().contains("image offset 2 is 5 after 10"), e.getMessage());
  }

  @Test
  void offsetsNotStartingAtZeroAreRefused() throws Exception {
    Path file = tmp.resolve("start.arrow");
    write(file, new int[] {4, 10, 20}, new byte[] {1, 1});
    var e = assertThrows(ShardFormatException.class, () -> ShardReader.open(file, null));
    assertTrue(e.getMessage().contains("image offsets start at 4"), e.getMessage());
  }

  @Test
  void anUnknownEncodingNamesTheSample() throws Exception {
    Path file = tmp.resolve("enc.arrow");
    write(file, new int[] {0, 10, 20}, new byte[] {1, 7});
    try (ShardReader reader = ShardReader.open(file, null)) {
      var e = assertThrows(IllegalStateException.class, () -> reader.batch(0));
      assertTrue(
          e.getMessage().contains("row 1 (sample " + ShardFixtures.id(1) + ")"), e.getMessage());
      assertTrue(e.getMessage().contains("unknown image encoding 7"), e.getMessage());
    }
  }

  @Test
  void pixelsOfTheWrongSizeAreRefused() throws Exception {
    Path file = tmp.resolve("raw.arrow");
    write(file, new int[] {0, 10}, new byte[] {ShardSchema.RAW_ROW});
    try (ShardReader reader = ShardReader.open(file, null)) {
      var e = assertThrows(IllegalStateException.class, () -> reader.batch(0));
      assertTrue(e.getMessage().contains("holds 10 bytes of pixels"), e.getMessage());
    }
  }

  @Test
  void aJpegRowIsNotCopiedAsPixels() throws Exception {
    Path file = tmp.resolve("j.arrow");
    write(file, new int[] {0, 10}, new byte[] {ShardSchema.JPEG_ROW});
    try (ShardReader reader = ShardReader.open(file, null);
        ShardBatch batch = reader.batch(0)) {
      var e =
          assertThrows(
              IllegalStateException.class,
              () -> batch.copyImage(0, java.nio.ByteBuffer.allocate(1000)));
      assertTrue(e.getMessage().contains("holds a JPEG"), e.getMessage());
    }
  }

  /**
   * An encoded shard of one batch written with Arrow's own writer, its image offsets as given (so
   * that they can be what ShardWriter never writes).
   */
  private static void write(Path file, int[] offsets, byte[] encodings) throws Exception {
    int rows = encodings.length;
    try (RootAllocator allocator = new RootAllocator();
        VectorSchemaRoot root = VectorSchemaRoot.create(ENCODED.toArrow(), allocator);
        OutputStream out = Files.newOutputStream(file);
        ArrowFileWriter writer = new ArrowFileWriter(root, null, Channels.newChannel(out))) {
      writer.start();
      VarBinaryVector images = (VarBinaryVector) root.getVector(ShardSchema.IMAGE);
      List<Integer> lengths = new ArrayList<>();
      int last = offsets[offsets.length - 1];
      images.allocateNew(last, rows);
      for (int r = 0; r < rows; r++) {
        images.setSafe(r, new byte[Math.max(0, offsets[r + 1] - offsets[r])]);
        lengths.add(offsets[r + 1] - offsets[r]);
      }
      images.setValueCount(rows);
      for (int i = 0; i < offsets.length; i++) {
        images.getOffsetBuffer().setInt((long) i * Integer.BYTES, offsets[i]);
      }
      IntVector labels = (IntVector) root.getVector(ShardSchema.LABEL);
      BigIntVector ids = (BigIntVector) root.getVector(ShardSchema.ID);
      TinyIntVector enc = (TinyIntVector) root.getVector(ShardSchema.ENCODING);
      labels.allocateNew(rows);
      ids.allocateNew(rows);
      enc.allocateNew(rows);
      for (int r = 0; r < rows; r++) {
        labels.set(r, 0);
        ids.set(r, ShardFixtures.id(r));
        enc.set(r, encodings[r]);
      }
      root.setRowCount(rows);
      writer.writeBatch();
      writer.end();
    }
  }
}
