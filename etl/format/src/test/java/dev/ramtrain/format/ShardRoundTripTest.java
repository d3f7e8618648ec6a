package dev.ramtrain.format;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.management.ThreadMXBean;
import java.io.ByteArrayOutputStream;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FixedSizeBinaryVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ShardRoundTripTest {
  @TempDir Path tmp;

  @Test
  void rowsComeBackExactlyAcrossBatches() throws Exception {
    Path file = tmp.resolve("s.arrow");
    ShardStats stats = ShardFixtures.write(file, ShardFixtures.SCHEMA, 23, 4);
    assertEquals(23, stats.rows());
    assertEquals(List.of(8L, 8L, 7L), stats.classCounts());
    try (ShardReader reader = ShardReader.open(file, stats.crc32c())) {
      assertEquals(ShardFixtures.SCHEMA, reader.schema());
      assertEquals(6, reader.batchCount(), "23 rows at 4 per batch");
      assertEquals(23, reader.rowCount());
      int row = 0;
      for (int b = 0; b < reader.batchCount(); b++) {
        try (ShardBatch batch = reader.batch(b)) {
          for (int r = 0; r < batch.rowCount(); r++, row++) {
            assertArrayEquals(ShardFixtures.pixels(row, 105), batch.image(r), "row " + row);
            assertEquals(ShardFixtures.label(row), batch.label(r));
            assertEquals(ShardFixtures.id(row), batch.id(r));
          }
        }
      }
      assertEquals(23, row);
    }
  }

  @Test
  void arrowsOwnFileReaderReadsTheSameShard() throws Exception {
    Path file = tmp.resolve("s.arrow");
    ShardFixtures.write(file, ShardFixtures.SCHEMA, 10, 3);
    try (RootAllocator allocator = new RootAllocator();
        ArrowFileReader reader = new ArrowFileReader(Files.newByteChannel(file), allocator)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      var meta = root.getSchema().getCustomMetadata();
      assertEquals("5", meta.get("ramtrain.height"));
      assertEquals("7", meta.get("ramtrain.width"));
      assertEquals("3", meta.get("ramtrain.channels"));
      assertEquals("HWC", meta.get("ramtrain.layout"));
      assertEquals("[\"alpha\",\"beta\",\"gamma\"]", meta.get("ramtrain.classes"));
      int row = 0;
      while (reader.loadNextBatch()) {
        var images = (FixedSizeBinaryVector) root.getVector("image");
        var labels = (IntVector) root.getVector("label");
        var ids = (BigIntVector) root.getVector("id");
        for (int r = 0; r < root.getRowCount(); r++, row++) {
          assertArrayEquals(ShardFixtures.pixels(row, 105), images.get(r));
          assertEquals(ShardFixtures.label(row), labels.get(r));
          assertEquals(ShardFixtures.id(row), ids.get(r));
        }
      }
      assertEquals(10, row);
    }
  }

  /** The writer refills one batch's buffers; a shorter last batch must not inherit their bits. */
  @Test
  void aShorterLastBatchCarriesNoValidityBitsOfTheBatchBefore() throws Exception {
    Path file = tmp.resolve("s.arrow");
    ShardFixtures.write(file, ShardFixtures.SCHEMA, 11, 4); // batches of 4, 4 and 3 rows
    try (RootAllocator allocator = new RootAllocator();
        ArrowFileReader reader = new ArrowFileReader(Files.newByteChannel(file), allocator)) {
      VectorSchemaRoot root = reader.getVectorSchemaRoot();
      int[] expected = {0b1111, 0b1111, 0b0111};
      for (int b = 0; b < 3; b++) {
        assertTrue(reader.loadNextBatch());
        for (String column : List.of("image", "label", "id")) {
          var validity = ((BaseFixedWidthVector) root.getVector(column)).getValidityBuffer();
          assertEquals(expected[b], validity.getByte(0), column + " validity of batch " + b);
        }
      }
    }
  }

  @Test
  void fileBytesAreAnArrowFileWithTheStatedChecksumAndAreReproducible() throws Exception {
    Path a = tmp.resolve("a.arrow");
    Path b = tmp.resolve("b.arrow");
    ShardStats stats = ShardFixtures.write(a, ShardFixtures.SCHEMA, 9, 2);
    ShardFixtures.write(b, ShardFixtures.SCHEMA, 9, 2);
    byte[] bytes = Files.readAllBytes(a);
    assertArrayEquals(bytes, Files.readAllBytes(b), "same rows, same bytes");
    assertEquals(bytes.length, stats.bytes());
    CRC32C crc = new CRC32C();
    crc.update(bytes);
    assertEquals(crc.getValue(), stats.crc32c());
    assertArrayEquals("ARROW1\0\0".getBytes(StandardCharsets.US_ASCII), Arrays.copyOf(bytes, 8));
    assertArrayEquals(
        "ARROW1".getBytes(StandardCharsets.US_ASCII),
        Arrays.copyOfRange(bytes, bytes.length - 6, bytes.length));
  }

  @Test
  void nativeAndHeapAppendsWriteTheSameBytes() throws Exception {
    int bytes = ShardFixtures.SCHEMA.shape().bytes();
    ByteArrayOutputStream heap = new ByteArrayOutputStream();
    ByteArrayOutputStream direct = new ByteArrayOutputStream();
    ByteBuffer staging = ByteBuffer.allocateDirect(bytes);
    try (ShardWriter h = new ShardWriter(ShardFixtures.SCHEMA, heap, 1 << 20);
        ShardWriter d = new ShardWriter(ShardFixtures.SCHEMA, direct, 1 << 20)) {
      for (int r = 0; r < 5; r++) {
        h.append(ShardFixtures.id(r), ShardFixtures.label(r), ShardFixtures.pixels(r, bytes));
        staging.clear();
        staging.put(ShardFixtures.pixels(r, bytes));
        d.append(
            ShardFixtures.id(r), ShardFixtures.label(r), MemoryUtil.getByteBufferAddress(staging));
      }
      assertEquals(h.finish(), d.finish());
    }
    assertArrayEquals(heap.toByteArray(), direct.toByteArray());
  }

  @Test
  void pixelsAreReadInPlaceNotCopied() throws Exception {
    Path file = tmp.resolve("s.arrow");
    ShardFixtures.write(file, ShardFixtures.SCHEMA, 12, 5);
    byte[] bytes = Files.readAllBytes(file);
    ByteBuffer shard = ByteBuffer.allocateDirect(bytes.length).put(bytes).flip();
    long base = MemoryUtil.getByteBufferAddress(shard);
    try (ShardReader reader = ShardReader.open("direct", shard, null);
        ShardBatch batch = reader.batch(1)) {
      long address = batch.imageAddress(2);
      assertTrue(
          address >= base && address + 105 <= base + bytes.length,
          "pixels point into the shard buffer");
      byte before = batch.image(2)[0];
      shard.put(
          (int) (address - base), (byte) (before + 1)); // write through the shard's own memory
      assertEquals(
          (byte) (before + 1), batch.image(2)[0], "the batch sees the shard's bytes, not a copy");
    }
  }

  @Test
  void mappedReadCopiesNoPixelsOntoTheHeap() throws Exception {
    ShardSchema schema = new ShardSchema(new ImageShape(64, 64, 3), List.of("a", "b", "c"));
    Path file = tmp.resolve("big.arrow");
    ShardFixtures.write(file, schema, 600, 64);
    ByteBuffer staging = ByteBuffer.allocateDirect(schema.shape().bytes());
    ThreadMXBean mx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    for (int round = 0; round < 3; round++) { // the last round is measured, after warm-up
      long before = mx.getCurrentThreadAllocatedBytes();
      long rows = 0;
      try (ShardReader reader = ShardReader.open(file, null)) {
        for (int b = 0; b < reader.batchCount(); b++) {
          try (ShardBatch batch = reader.batch(b)) {
            for (int r = 0; r < batch.rowCount(); r++, rows++) {
              staging.clear();
              batch.copyImage(r, staging);
            }
          }
        }
      }
      double heapPerSample = (double) (mx.getCurrentThreadAllocatedBytes() - before) / rows;
      if (round == 2) {
        assertTrue(
            heapPerSample < schema.shape().bytes() / 8.0,
            "heap bytes per sample " + heapPerSample + " vs image bytes " + schema.shape().bytes());
      }
    }
  }
}
