package dev.ramtrain.trainer.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardWriter;
import dev.ramtrain.random.Seeds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.arrow.memory.util.MemoryUtil;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The loader's path for encoded shards, with a stand-in codec whose decode is known exactly (the
 * real JPEG decoder's region and scale are proven in the etl module): a JPEG row's batches are
 * those of its pixels, the decoder is asked for the crop's region at the largest DCT scale that
 * still covers the output, and a row that does not decode fails naming itself or is replaced.
 */
class JpegRowLoaderTest {
  private static final ImageShape SHAPE = new ImageShape(24, 32, 3);
  private static final int ROWS = 18;
  private static final long BAD = 7; // the sample whose "JPEG" is damaged, where asked for
  @TempDir Path tmp;

  static byte[] pixels(long id) {
    byte[] p = new byte[SHAPE.bytes()];
    new SplittableRandom(id).nextBytes(p);
    return p;
  }

  /** The stand-in JPEG: "FAKE", the sample id, then its pixels. */
  static byte[] fake(long id, boolean damaged) {
    ByteBuffer b = ByteBuffer.allocate(12 + SHAPE.bytes()).order(ByteOrder.LITTLE_ENDIAN);
    b.put((damaged ? "BAD!" : "FAKE").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
    b.putLong(id).put(pixels(id));
    return b.array();
  }

  /**
   * Decodes the stand-in: the image scaled by 1/reduce as box averages over reduce × reduce blocks
   * (the last ones partial, libjpeg's rounded-up size), then the region; records each call by id.
   */
  static final class FakeCodec implements JpegDecoder {
    final int largest;
    final Map<Long, int[]> calls = new ConcurrentHashMap<>();
    final Set<Long> addresses = ConcurrentHashMap.newKeySet(); // where each JPEG was read

    FakeCodec(int largest) {
      this.largest = largest;
    }

    @Override
    public int largestReduce() {
      return largest;
    }

    @Override
    public String decode(
        long jpeg,
        int length,
        ImageShape stored,
        int reduce,
        int x,
        int y,
        int width,
        int height,
        long target) {
      addresses.add(jpeg);
      byte[] bytes = new byte[length];
      MemoryUtil.copyFromMemory(jpeg, bytes, 0, length);
      ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
      if (bytes[0] != 'F') {
        return "not a stand-in image";
      }
      long id = b.getLong(4);
      calls.put(id, new int[] {reduce, x, y, width, height});
      byte[] out = scaledRegion(pixels(id), stored, reduce, x, y, width, height);
      MemoryUtil.copyToMemory(out, 0, target, out.length);
      return null;
    }
  }

  static byte[] scaledRegion(
      byte[] image, ImageShape stored, int reduce, int x, int y, int width, int height) {
    int c = stored.channels();
    byte[] out = new byte[width * height * c];
    for (int oy = 0; oy < height; oy++) {
      for (int ox = 0; ox < width; ox++) {
        for (int k = 0; k < c; k++) {
          int sum = 0;
          int n = 0;
          for (int dy = 0; dy < reduce; dy++) {
            for (int dx = 0; dx < reduce; dx++) {
              int sy = (y + oy) * reduce + dy;
              int sx = (x + ox) * reduce + dx;
              if (sy < stored.height() && sx < stored.width()) {
                sum += image[(sy * stored.width() + sx) * c + k] & 0xFF;
                n++;
              }
            }
          }
          out[(oy * width + ox) * c + k] = (byte) Math.round((float) sum / n);
        }
      }
    }
    return out;
  }

  /** One shard of ROWS samples: pixels, or stand-in JPEGs but for every third (mixed rows). */
  private ShardSet shard(boolean encoded, boolean damage) throws Exception {
    ShardSchema schema =
        new ShardSchema(
            SHAPE,
            List.of("a", "b", "c"),
            encoded ? ShardSchema.Storage.ENCODED : ShardSchema.Storage.PIXELS);
    Path file = tmp.resolve((encoded ? "e" : "p") + (damage ? "d" : "") + ".arrow");
    try (OutputStream out = Files.newOutputStream(file);
        ShardWriter w = new ShardWriter(schema, out, 5L * SHAPE.bytes())) {
      for (long id = 0; id < ROWS; id++) {
        if (encoded && id % 3 != 0) {
          w.appendJpeg(id, (int) (id % 3), fake(id, damage && id == BAD));
        } else {
          w.append(id, (int) (id % 3), pixels(id));
        }
      }
      w.finish();
    }
    return new ShardSet(SHAPE, schema.classes(), List.of(ShardReader.open(file, null)));
  }

  private static LoaderSpec options(LoaderSpec.SampleAugmentation augmentation) {
    return new LoaderSpec(
        4,
        2,
        2,
        new LoaderSpec.Sampling(42, true, LoaderSpec.Remainder.KEEP),
        augmentation,
        LoaderSpec.Rank.SINGLE);
  }

  private static final RandomResizedCrop CROP =
      new RandomResizedCrop(6, 5, 0.08, 1.0, 0.75, 4 / 3.0);

  @Test
  void jpegRowsDecodedAtFullScaleGiveTheBatchesOfTheirPixels() throws Exception {
    List<LoaderSpec.SampleAugmentation> augmentations =
        List.of(
            new LoaderSpec.SampleAugmentation(0, true, CROP),
            new LoaderSpec.SampleAugmentation(3, true),
            new LoaderSpec.SampleAugmentation(0, false, new CenterCrop(16, 16, 0.875)));
    try (Backend backend = new CpuBackend(1);
        ShardSet pixelShard = shard(false, false);
        ShardSet encodedShard = shard(true, false)) {
      for (LoaderSpec.SampleAugmentation a : augmentations) {
        List<byte[]> expected;
        try (DataLoader raw = new DataLoader(backend, pixelShard, options(a))) {
          expected = DataLoaderTest.drain(raw, 3);
        }
        FakeCodec codec = new FakeCodec(1);
        try (DataLoader decoding =
            new DataLoader(
                backend,
                encodedShard,
                options(a),
                AntialiasedResize::new,
                codec,
                BadSamples.FAIL)) {
          List<byte[]> got = DataLoaderTest.drain(decoding, 3);
          assertEquals(expected.size(), got.size());
          for (int i = 0; i < got.size(); i++) {
            assertArrayEquals(expected.get(i), got.get(i), a + ", batch " + i);
          }
          assertEquals(12, codec.calls.size(), "every JPEG row decoded, no pixel row");
          assertTrue(decoding.work().decodeNanos() > 0, "decoding timed");
        }
      }
    }
  }

  @Test
  void aCropIsDecodedAtTheLargestScaleThatStillCoversItsOutput() throws Exception {
    LoaderSpec options = options(new LoaderSpec.SampleAugmentation(0, true, CROP));
    FakeCodec codec = new FakeCodec(8);
    List<byte[]> batches;
    try (Backend backend = new CpuBackend(1);
        ShardSet encodedShard = shard(true, false);
        DataLoader loader =
            new DataLoader(
                backend, encodedShard, options, AntialiasedResize::new, codec, BadSamples.FAIL)) {
      batches = DataLoaderTest.drain(loader, 1);
    }
    Set<Integer> scales = new java.util.TreeSet<>();
    Map<Long, byte[]> expectedById = new java.util.HashMap<>();
    for (long id = 0; id < ROWS; id++) {
      if (id % 3 == 0) {
        continue;
      }
      SplittableRandom rng = new SplittableRandom(Seeds.mix(42, 1, id));
      CropPlan plan = CROP.plan(SHAPE.height(), SHAPE.width(), rng::nextDouble);
      boolean mirror = rng.nextBoolean();
      int reduce = 1;
      while (reduce < 8 && plan.width() >= 2 * reduce * 5 && plan.height() >= 2 * reduce * 6) {
        reduce *= 2;
      }
      int[] call = codec.calls.get(id);
      assertNotNull(call, "sample " + id + " decoded");
      assertEquals(reduce, call[0], "sample " + id + "'s scale for a " + plan);
      scales.add(reduce);
      // The region is the crop's, in the scaled pixels, rounded by at most half a pixel.
      assertTrue(Math.abs(call[1] * reduce - plan.left()) <= reduce / 2.0, "left " + id);
      assertTrue(Math.abs(call[2] * reduce - plan.top()) <= reduce / 2.0, "top " + id);
      assertTrue(
          Math.abs((call[1] + call[3]) * reduce - (plan.left() + plan.width())) <= reduce / 2.0,
          "right " + id);
      // What the batch holds: that region, resampled to the output, flipped as drawn.
      byte[] region = scaledRegion(pixels(id), SHAPE, reduce, call[1], call[2], call[3], call[4]);
      ByteBuffer out = ByteBuffer.allocate(6 * 5 * 3);
      new AntialiasedResize()
          .resize(
              ByteBuffer.wrap(region),
              call[3],
              3,
              new CropPlan(0, 0, call[4], call[3], 6, 5, 0, 0),
              6,
              5,
              mirror,
              out,
              0);
      expectedById.put(id, out.array());
    }
    assertTrue(scales.size() > 1, "crops of several scales drawn: " + scales);
    int found = 0;
    for (byte[] batch : batches) {
      int n = batch.length / (90 + 4);
      for (int j = 0; j < n; j++) {
        byte[] image = java.util.Arrays.copyOfRange(batch, j * 90, (j + 1) * 90);
        for (byte[] e : expectedById.values()) {
          if (java.util.Arrays.equals(e, image)) {
            found++;
          }
        }
      }
    }
    assertEquals(expectedById.size(), found, "each JPEG row's crop is in the epoch");
  }

  @Test
  void jpegRowsResumeMidEpochBitForBitAndSplitOverRanks() throws Exception {
    LoaderSpec.Sampling shuffled = new LoaderSpec.Sampling(42, true, LoaderSpec.Remainder.DROP);
    LoaderSpec.SampleAugmentation rrc = new LoaderSpec.SampleAugmentation(0, true, CROP);
    try (Backend backend = new CpuBackend(1);
        ShardSet encoded = shard(true, false)) {
      List<byte[]> whole;
      try (DataLoader one =
          new DataLoader(
              backend,
              encoded,
              new LoaderSpec(4, 1, 2, shuffled, rrc, LoaderSpec.Rank.SINGLE),
              AntialiasedResize::new,
              new FakeCodec(8),
              BadSamples.FAIL)) {
        whole = DataLoaderTest.drain(one, 2);
      }
      assertEquals(4, whole.size());
      try (DataLoader resumed =
              new DataLoader(
                  backend,
                  encoded,
                  new LoaderSpec(4, 3, 3, shuffled, rrc, LoaderSpec.Rank.SINGLE),
                  AntialiasedResize::new,
                  new FakeCodec(8),
                  BadSamples.FAIL);
          DataLoader.Epoch e = resumed.epoch(2, 1)) {
        for (int i = 1; i < whole.size(); i++) {
          Batch b = e.next();
          byte[] pixels = new byte[b.size() * 90];
          b.pixels().asByteBuffer().get(pixels);
          assertArrayEquals(
              java.util.Arrays.copyOf(whole.get(i), pixels.length), pixels, "batch " + i);
          b.release();
        }
      }
      // Two ranks of batches of 2: together the one-rank epoch's batches of 4, halves alike.
      for (int rank = 0; rank < 2; rank++) {
        try (DataLoader r =
            new DataLoader(
                backend,
                encoded,
                new LoaderSpec(2, 2, 2, shuffled, rrc, new LoaderSpec.Rank(rank, 2)),
                AntialiasedResize::new,
                new FakeCodec(8),
                BadSamples.FAIL)) {
          List<byte[]> mine = DataLoaderTest.drain(r, 2);
          assertEquals(whole.size(), mine.size());
          for (int i = 0; i < mine.size(); i++) {
            byte[] half = java.util.Arrays.copyOfRange(whole.get(i), rank * 180, rank * 180 + 180);
            assertArrayEquals(half, java.util.Arrays.copyOf(mine.get(i), 180), "rank " + rank);
          }
        }
      }
    }
  }

  @Test
  void aSampleThatDoesNotDecodeFailsNamingItselfAndItsShard() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet damaged = shard(true, true);
        DataLoader loader =
            new DataLoader(
                backend,
                damaged,
                options(new LoaderSpec.SampleAugmentation(0, true, CROP)),
                AntialiasedResize::new,
                new FakeCodec(8),
                BadSamples.FAIL)) {
      BadSampleException e =
          assertThrows(BadSampleException.class, () -> DataLoaderTest.drain(loader, 0));
      String message = e.getMessage();
      assertTrue(message.contains("ed.arrow: sample 7 (record batch"), message);
      assertTrue(message.contains("not a stand-in image"), message);
      assertTrue(message.contains("bad-sample=skip"), message);
    }
  }

  @Test
  void skippingPutsTheNextSampleOfItsRecordBatchInItsPlace() throws Exception {
    LoaderSpec options =
        new LoaderSpec(
            4,
            2,
            2,
            new LoaderSpec.Sampling(42, false, LoaderSpec.Remainder.KEEP),
            new LoaderSpec.SampleAugmentation(0, false),
            LoaderSpec.Rank.SINGLE);
    try (Backend backend = new CpuBackend(1);
        ShardSet damaged = shard(true, true);
        DataLoader loader =
            new DataLoader(
                backend,
                damaged,
                options,
                AntialiasedResize::new,
                new FakeCodec(8),
                BadSamples.SKIP)) {
      List<byte[]> batches = DataLoaderTest.drain(loader, 0);
      List<byte[]> images = new ArrayList<>();
      List<Integer> labels = new ArrayList<>();
      for (byte[] batch : batches) {
        int n = batch.length / (SHAPE.bytes() + 4);
        ByteBuffer labelBytes =
            ByteBuffer.wrap(batch, n * SHAPE.bytes(), 4 * n).order(ByteOrder.nativeOrder());
        for (int j = 0; j < n; j++) {
          images.add(
              java.util.Arrays.copyOfRange(batch, j * SHAPE.bytes(), (j + 1) * SHAPE.bytes()));
          labels.add(labelBytes.getInt());
        }
      }
      assertEquals(ROWS, images.size(), "batches stay full");
      for (int id = 0; id < ROWS; id++) {
        // Sample 7 ends its record batch (samples 4..7: the stand-in JPEGs, a few bytes longer than
        // pixels, cut batches of 5 images' bytes at 4 rows), so the batch's first stands in.
        int shown = id == BAD ? 4 : id;
        assertArrayEquals(pixels(shown), images.get(id), "position " + id);
        assertEquals(shown % 3, labels.get(id), "the stand-in's label, position " + id);
      }
      assertEquals(1, loader.work().replaced());
    }
  }

  @Test
  void encodedShardsWithoutADecoderAreRefusedNamingTheShard() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet encoded = shard(true, false)) {
      var e =
          assertThrows(
              IllegalArgumentException.class,
              () -> new DataLoader(backend, encoded, options(LoaderSpec.SampleAugmentation.NONE)));
      assertTrue(e.getMessage().contains("e.arrow holds JPEG rows"), e.getMessage());
    }
  }

  /**
   * A memory-mapped shard's JPEG rows reach the (native) decoder as copies, never as addresses in
   * the mapping: a file cut short under libjpeg would end the process with a signal, where a copy
   * made in Java fails as an error the loader names.
   */
  @Test
  void theDecoderNeverReadsAMapping() throws Exception {
    FakeCodec codec = new FakeCodec(8);
    try (Backend backend = new CpuBackend(1);
        ShardSet encodedShard = shard(true, false);
        DataLoader loader =
            new DataLoader(
                backend,
                encodedShard,
                options(new LoaderSpec.SampleAugmentation(0, true, CROP)),
                AntialiasedResize::new,
                codec,
                BadSamples.FAIL)) {
      DataLoaderTest.drain(loader, 1);
      ShardReader reader = encodedShard.readers().get(0);
      long first = Long.MAX_VALUE;
      long end = Long.MIN_VALUE;
      for (int b = 0; b < reader.batchCount(); b++) {
        try (var batch = reader.batch(b)) {
          for (int r = 0; r < batch.rowCount(); r++) {
            first = Math.min(first, batch.imageAddress(r));
            end = Math.max(end, batch.imageAddress(r) + batch.imageLength(r));
          }
        }
      }
      assertTrue(reader.mapped());
      assertEquals(12, codec.calls.size(), "every JPEG row decoded");
      for (long at : codec.addresses) {
        assertTrue(at < first || at >= end, "the decoder read the mapping at " + at);
      }
    }
  }
}
