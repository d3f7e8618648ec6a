package dev.ramtrain.trainer.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardWriter;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DataLoaderTest {
  static final ImageShape SHAPE = new ImageShape(4, 5, 3);
  @TempDir Path tmp;

  /** Three shards of 13, 7 and 20 samples; sample id s*1000+r, pixel i = (id*7 + i) mod 256. */
  private ShardSet shards() throws Exception {
    ShardSchema schema = new ShardSchema(SHAPE, List.of("a", "b", "c"));
    List<ShardReader> readers = new ArrayList<>();
    int[] sizes = {13, 7, 20};
    for (int s = 0; s < sizes.length; s++) {
      Path file = tmp.resolve("s" + s + ".arrow");
      try (OutputStream out = Files.newOutputStream(file);
          ShardWriter w = new ShardWriter(schema, out, SHAPE.bytes() * 4L)) {
        for (int r = 0; r < sizes[s]; r++) {
          long id = s * 1000L + r;
          w.append(id, (int) (id % 3), pixels(id));
        }
        w.finish();
      }
      readers.add(ShardReader.open(file, null));
    }
    return new ShardSet(SHAPE, schema.classes(), readers);
  }

  static byte[] pixels(long id) {
    byte[] p = new byte[SHAPE.bytes()];
    for (int i = 0; i < p.length; i++) {
      p[i] = (byte) (id * 7 + i);
    }
    return p;
  }

  /** Every batch of an epoch as (pixels, labels) arrays. */
  static List<byte[]> drain(DataLoader loader, int epoch) {
    List<byte[]> out = new ArrayList<>();
    try (DataLoader.Epoch e = loader.epoch(epoch)) {
      Batch b;
      while ((b = e.next()) != null) {
        byte[] bytes = new byte[b.size() * SHAPE.bytes() + 4 * b.size()];
        b.pixels().asByteBuffer().get(bytes, 0, b.size() * SHAPE.bytes());
        b.labels().asByteBuffer().get(bytes, b.size() * SHAPE.bytes(), 4 * b.size());
        out.add(bytes);
        b.release();
      }
    }
    return out;
  }

  private static LoaderOptions options(
      int workers,
      int prefetch,
      LoaderOptions.Remainder rest,
      int rank,
      int world,
      int pad,
      boolean flip) {
    return new LoaderOptions(
        8,
        workers,
        prefetch,
        new LoaderOptions.Sampling(42, true, rest),
        new LoaderOptions.Augmentation(pad, flip),
        new LoaderOptions.Rank(rank, world));
  }

  @Test
  void batchesDoNotDependOnWorkersOrPrefetch() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards()) {
      List<byte[]> reference;
      try (DataLoader one =
          new DataLoader(
              backend, set, options(1, 1, LoaderOptions.Remainder.DROP, 0, 1, 1, true))) {
        reference = drain(one, 3);
      }
      try (DataLoader many =
          new DataLoader(
              backend, set, options(3, 4, LoaderOptions.Remainder.DROP, 0, 1, 1, true))) {
        List<byte[]> again = drain(many, 3);
        assertEquals(reference.size(), again.size());
        for (int i = 0; i < again.size(); i++) {
          assertArrayEquals(reference.get(i), again.get(i), "batch " + i);
        }
        assertNotEquals(
            new String(reference.get(0)),
            new String(drain(many, 4).get(0)),
            "another epoch, another order");
      }
    }
  }

  @Test
  void everySampleOncePerEpochAndEqualBatchesPerRank() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards()) {
      // One rank, keep: each of the 40 samples exactly once (read back through its label and
      // pixels).
      try (DataLoader loader =
          new DataLoader(
              backend, set, options(2, 2, LoaderOptions.Remainder.KEEP, 0, 1, 0, false))) {
        assertEquals(5, loader.batchesPerEpoch());
        Set<String> seen = new HashSet<>();
        for (byte[] batch : drain(loader, 0)) {
          int n = batch.length / (SHAPE.bytes() + 4);
          for (int j = 0; j < n; j++) {
            seen.add(
                new String(
                    java.util.Arrays.copyOfRange(batch, j * SHAPE.bytes(), (j + 1) * SHAPE.bytes()),
                    java.nio.charset.StandardCharsets.ISO_8859_1));
          }
        }
        assertEquals(40, seen.size());
      }
      // Three ranks, keep: each sample on exactly one rank (data-parallel evaluation).
      List<String> overRanks = new ArrayList<>();
      for (int rank = 0; rank < 3; rank++) {
        try (DataLoader loader =
            new DataLoader(
                backend, set, options(2, 2, LoaderOptions.Remainder.KEEP, rank, 3, 0, false))) {
          for (byte[] batch : drain(loader, 0)) {
            int n = batch.length / (SHAPE.bytes() + 4);
            for (int j = 0; j < n; j++) {
              overRanks.add(
                  new String(
                      java.util.Arrays.copyOfRange(
                          batch, j * SHAPE.bytes(), (j + 1) * SHAPE.bytes()),
                      java.nio.charset.StandardCharsets.ISO_8859_1));
            }
          }
        }
      }
      assertEquals(40, overRanks.size());
      assertEquals(40, new HashSet<>(overRanks).size());
      for (LoaderOptions.Remainder rest : LoaderOptions.Remainder.values()) {
        Map<Integer, Integer> batchesPerRank = new HashMap<>();
        for (int rank = 0; rank < 3; rank++) {
          try (DataLoader loader =
              new DataLoader(backend, set, options(1, 2, rest, rank, 3, 0, false))) {
            batchesPerRank.put(rank, drain(loader, 1).size());
          }
        }
        assertEquals(
            1, new HashSet<>(batchesPerRank.values()).size(), rest + ": " + batchesPerRank);
        // 40 samples over 3 ranks: 13 each (drop), 14 + 13 + 13 (keep: every sample once) or
        // 14 each (pad); batches of 8.
        assertEquals(
            rest == LoaderOptions.Remainder.DROP ? 1 : 2, batchesPerRank.get(0), rest.name());
      }
    }
  }

  @Test
  void cropAndFlipAreThoseOfTheSamplesOwnGenerator() throws Exception {
    // Copy sample 1003 with padding 2 and flip as the loader does, and compare with a direct
    // reading.
    byte[] src = pixels(1003);
    for (long seed = 0; seed < 20; seed++) {
      SplittableRandom rng = new SplittableRandom(seed);
      int dy = rng.nextInt(5) - 2;
      int dx = rng.nextInt(5) - 2;
      boolean mirror = rng.nextBoolean();
      byte[] expected = new byte[src.length];
      for (int y = 0; y < 4; y++) {
        for (int x = 0; x < 5; x++) {
          int sy = y + dy;
          int sx = (mirror ? 4 - x : x) + dx;
          for (int k = 0; k < 3; k++) {
            expected[(y * 5 + x) * 3 + k] =
                sy < 0 || sy >= 4 || sx < 0 || sx >= 5 ? 0 : src[(sy * 5 + sx) * 3 + k];
          }
        }
      }
      java.nio.ByteBuffer in = java.nio.ByteBuffer.allocateDirect(src.length).put(src);
      java.nio.ByteBuffer out = java.nio.ByteBuffer.allocateDirect(src.length);
      DataLoader.Augment.copy(
          org.apache.arrow.memory.util.MemoryUtil.getByteBufferAddress(in),
          org.apache.arrow.memory.util.MemoryUtil.getByteBufferAddress(out),
          SHAPE,
          2,
          true,
          new SplittableRandom(seed));
      byte[] got = new byte[src.length];
      out.get(got);
      assertArrayEquals(expected, got, "seed " + seed);
    }
  }

  @Test
  void stallTimeIsMeasured() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards();
        DataLoader loader =
            new DataLoader(
                backend, set, options(1, 1, LoaderOptions.Remainder.DROP, 0, 1, 0, false))) {
      drain(loader, 0);
      assertTrue(loader.stallNanos() > 0);
      try (DataLoader.Epoch e = loader.epoch(1)) {
        for (int i = 0; i < loader.batchesPerEpoch(); i++) {
          e.next().release();
        }
        assertNull(e.next());
      }
    }
  }
}
