package dev.ramtrain.trainer.data;

import static dev.ramtrain.trainer.data.LoaderSpec.Remainder.DROP;
import static dev.ramtrain.trainer.data.LoaderSpec.Remainder.KEEP;
import static dev.ramtrain.trainer.data.LoaderSpec.Remainder.PAD;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardWriter;
import dev.ramtrain.random.Seeds;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.function.LongFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DataLoaderTest {
  static final ImageShape SHAPE = new ImageShape(4, 5, 3);
  @TempDir Path tmp;

  private static final int[] SIZES = {13, 7, 20};

  /** Three shards of 13, 7 and 20 samples; sample id s*1000+r, pixel i = (id*7 + i) mod 256. */
  private ShardSet shards() throws Exception {
    return shards(0, 1, 2);
  }

  /** Those of the three shards numbered {@code which}. */
  private ShardSet shards(int... which) throws Exception {
    return shards(DataLoaderTest::pixels, which);
  }

  /** Those of the three shards numbered {@code which}, sample id's pixels {@code image(id)}. */
  private ShardSet shards(LongFunction<byte[]> image, int... which) throws Exception {
    ShardSchema schema = new ShardSchema(SHAPE, List.of("a", "b", "c"));
    List<ShardReader> readers = new ArrayList<>();
    int[] sizes = SIZES;
    for (int s : which) {
      Path file = tmp.resolve("s" + s + ".arrow");
      try (OutputStream out = Files.newOutputStream(file);
          ShardWriter w = new ShardWriter(schema, out, SHAPE.bytes() * 4L)) {
        for (int r = 0; r < sizes[s]; r++) {
          long id = s * 1000L + r;
          w.append(id, (int) (id % 3), image.apply(id));
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
        int image = loader.shape().bytes();
        byte[] bytes = new byte[b.size() * image + 4 * b.size()];
        b.pixels().asByteBuffer().get(bytes, 0, b.size() * image);
        b.labels().asByteBuffer().get(bytes, b.size() * image, 4 * b.size());
        out.add(bytes);
        b.release();
      }
    }
    return out;
  }

  private static LoaderSpec options(
      int workers,
      int prefetch,
      LoaderSpec.Remainder rest,
      int rank,
      int world,
      int pad,
      boolean flip) {
    return new LoaderSpec(
        8,
        workers,
        prefetch,
        new LoaderSpec.Sampling(42, true, rest),
        new LoaderSpec.SampleAugmentation(pad, flip),
        new LoaderSpec.Rank(rank, world));
  }

  @Test
  void batchesDoNotDependOnWorkersOrPrefetch() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards()) {
      List<byte[]> reference;
      try (DataLoader one =
          new DataLoader(backend, set, options(1, 1, LoaderSpec.Remainder.DROP, 0, 1, 1, true))) {
        reference = drain(one, 3);
      }
      try (DataLoader many =
          new DataLoader(backend, set, options(3, 4, LoaderSpec.Remainder.DROP, 0, 1, 1, true))) {
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
          new DataLoader(backend, set, options(2, 2, LoaderSpec.Remainder.KEEP, 0, 1, 0, false))) {
        assertEquals(5, loader.batchesPerEpoch());
        assertEquals(40, new HashSet<>(samples(drain(loader, 0))).size());
      }
      // Three ranks, keep: each sample on exactly one rank (data-parallel evaluation).
      List<String> overRanks = new ArrayList<>();
      for (int rank = 0; rank < 3; rank++) {
        try (DataLoader loader =
            new DataLoader(
                backend, set, options(2, 2, LoaderSpec.Remainder.KEEP, rank, 3, 0, false))) {
          overRanks.addAll(samples(drain(loader, 0)));
        }
      }
      assertEquals(40, overRanks.size());
      assertEquals(40, new HashSet<>(overRanks).size());
      for (LoaderSpec.Remainder rest : LoaderSpec.Remainder.values()) {
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
        assertEquals(rest == LoaderSpec.Remainder.DROP ? 1 : 2, batchesPerRank.get(0), rest.name());
      }
    }
  }

  /**
   * Rank r of N takes slice r of every global batch: its batch s is batch s·N + r of one process
   * whose steps accumulate N batches, so the two train alike. Remainder rules apply to whole steps
   * (40 samples in steps of 3 batches of 4: 3 steps dropping 4, 4 padding).
   */
  @Test
  void ranksTakeTheBatchesOfOneProcessAccumulatingThem() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards()) {
      for (LoaderSpec.Remainder rest :
          List.of(LoaderSpec.Remainder.DROP, LoaderSpec.Remainder.PAD)) {
        List<byte[]> accumulating;
        try (DataLoader one = new DataLoader(backend, set, stepsOf(4, 3, rest, 0, 1))) {
          accumulating = drain(one, 2);
        }
        assertEquals(rest == LoaderSpec.Remainder.DROP ? 9 : 12, accumulating.size(), "" + rest);
        for (int rank = 0; rank < 3; rank++) {
          try (DataLoader mine = new DataLoader(backend, set, stepsOf(4, 1, rest, rank, 3))) {
            List<byte[]> batches = drain(mine, 2);
            assertEquals(accumulating.size() / 3, batches.size(), rest + " rank " + rank);
            for (int s = 0; s < batches.size(); s++) {
              assertArrayEquals(
                  accumulating.get(3 * s + rank), batches.get(s), rest + " rank " + rank + " " + s);
            }
          }
        }
      }
    }
  }

  private static LoaderSpec stepsOf(
      int batch, int batchesPerStep, LoaderSpec.Remainder rest, int rank, int world) {
    return new LoaderSpec(
        batch,
        2,
        2,
        new LoaderSpec.Sampling(42, true, rest),
        LoaderSpec.SampleAugmentation.NONE,
        new LoaderSpec.Rank(rank, world),
        batchesPerStep);
  }

  /** The samples of {@code batches} (their pixels as text), in order. */
  private static List<String> samples(List<byte[]> batches) {
    List<String> out = new ArrayList<>();
    for (byte[] batch : batches) {
      int n = batch.length / (SHAPE.bytes() + 4);
      for (int j = 0; j < n; j++) {
        out.add(
            new String(
                java.util.Arrays.copyOfRange(batch, j * SHAPE.bytes(), (j + 1) * SHAPE.bytes()),
                java.nio.charset.StandardCharsets.ISO_8859_1));
      }
    }
    return out;
  }

  private static Set<String> samplesOfShards(int... which) {
    Set<String> out = new HashSet<>();
    for (int s : which) {
      for (int r = 0; r < SIZES[s]; r++) {
        out.add(new String(pixels(s * 1000L + r), java.nio.charset.StandardCharsets.ISO_8859_1));
      }
    }
    return out;
  }

  private static LoaderSpec owning(LoaderSpec.Remainder rest, int rank, int world, long share) {
    return new LoaderSpec(
        8,
        2,
        2,
        new LoaderSpec.Sampling(42, true, rest),
        LoaderSpec.SampleAugmentation.NONE,
        LoaderSpec.Rank.owning(rank, world, share));
  }

  @Test
  void ranksWithShardsOfTheirOwnTakeTheSameCountFromTheirOwnSamples() throws Exception {
    // Rank 0 holds shards 0 and 1 (20 samples), rank 1 shard 2 (20) and rank 2 nothing.
    try (Backend backend = new CpuBackend(1);
        ShardSet first = shards(0, 1);
        ShardSet second = shards(2)) {
      List<String> rank0;
      List<String> rank1;
      try (DataLoader a = new DataLoader(backend, first, owning(DROP, 0, 2, 16));
          DataLoader b = new DataLoader(backend, second, owning(DROP, 1, 2, 16))) {
        assertEquals(2, a.batchesPerEpoch());
        assertEquals(2, b.batchesPerEpoch());
        rank0 = samples(drain(a, 0));
        rank1 = samples(drain(b, 0));
        assertEquals(rank0, samples(drain(a, 0)), "the same epoch, the same order");
        assertNotEquals(rank0, samples(drain(a, 1)), "another epoch, another order");
      }
      assertEquals(16, new HashSet<>(rank0).size(), "no sample twice in an epoch");
      assertTrue(samplesOfShards(0, 1).containsAll(rank0), "rank 0 reads only its own shards");
      assertTrue(samplesOfShards(2).containsAll(rank1), "rank 1 reads only its own shards");

      // Padding to a share above what a rank holds wraps around its own samples.
      try (DataLoader padded = new DataLoader(backend, first, owning(PAD, 0, 2, 24))) {
        List<String> taken = samples(drain(padded, 0));
        assertEquals(24, taken.size());
        assertEquals(samplesOfShards(0, 1), new HashSet<>(taken));
      }
      // Dropping cannot take more than a rank holds: refused, naming the counts.
      IllegalArgumentException tooMany =
          org.junit.jupiter.api.Assertions.assertThrows(
              IllegalArgumentException.class,
              () -> new DataLoader(backend, first, owning(DROP, 0, 2, 24)).close());
      assertTrue(tooMany.getMessage().contains("holds 20 samples"), tooMany.getMessage());

      // Evaluation: every own sample once, and a rank that holds none runs no batch.
      try (DataLoader keep = new DataLoader(backend, first, owning(KEEP, 0, 3, 0));
          ShardSet none = new ShardSet(SHAPE, List.of("a", "b", "c"), List.of());
          DataLoader empty = new DataLoader(backend, none, owning(KEEP, 2, 3, 0))) {
        assertEquals(samplesOfShards(0, 1), new HashSet<>(samples(drain(keep, 0))));
        assertEquals(20, samples(drain(keep, 0)).size());
        assertEquals(0, empty.batchesPerEpoch());
        assertTrue(drain(empty, 0).isEmpty());
      }
    }
  }

  @Test
  void ranksHoldingDifferentShardsAgreeOnTheWholeSetsNormalization() throws Exception {
    // Golden: every pixel of the 40 samples, straight from their ids.
    int c = SHAPE.channels();
    double[] sum = new double[c];
    double[] squares = new double[c];
    for (int s = 0; s < SIZES.length; s++) {
      for (int r = 0; r < SIZES[s]; r++) {
        byte[] p = pixels(s * 1000L + r);
        for (int i = 0; i < p.length; i++) {
          double v = (p[i] & 0xFF) / 255.0;
          sum[i % c] += v;
          squares[i % c] += v * v;
        }
      }
    }
    double perChannel = 40.0 * SHAPE.height() * SHAPE.width();
    try (ShardSet all = shards();
        ShardSet first = shards(0, 1);
        ShardSet second = shards(2)) {
      double[] a = Normalization.moments(first, 1000);
      double[] b = Normalization.moments(second, 1000);
      double[] summed = new double[a.length];
      for (int i = 0; i < a.length; i++) {
        summed[i] = a[i] + b[i];
      }
      Normalization whole = Normalization.measure(all, 1000);
      Normalization overRanks = Normalization.fromMoments(summed);
      for (int k = 0; k < c; k++) {
        double mean = sum[k] / perChannel;
        double std = Math.sqrt(squares[k] / perChannel - mean * mean);
        assertEquals(mean, whole.mean()[k], 1e-6);
        assertEquals(std, whole.std()[k], 1e-6);
        assertEquals(whole.mean()[k], overRanks.mean()[k], 1e-6);
        assertEquals(whole.std()[k], overRanks.std()[k], 1e-6);
      }
      // The first 13 samples: shard 0 alone.
      try (ShardSet zero = shards(0)) {
        assertEquals(
            Normalization.measure(zero, 1000).mean()[0], Normalization.measure(all, 13).mean()[0]);
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

  /** Pixels no two samples share, so that crops name their sample. */
  static byte[] noise(long id) {
    byte[] p = new byte[SHAPE.bytes()];
    new SplittableRandom(id).nextBytes(p);
    return p;
  }

  private static final RandomResizedCrop CROP =
      new RandomResizedCrop(3, 3, 0.3, 1.0, 0.75, 4 / 3.0);

  /** Sample {@code id} as epoch {@code epoch} of seed 42 crops and flips it. */
  private static byte[] resizedCrop(long id, int epoch) {
    SplittableRandom rng = new SplittableRandom(Seeds.mix(42, epoch, id));
    CropPlan plan = CROP.plan(SHAPE.height(), SHAPE.width(), rng::nextDouble);
    java.nio.ByteBuffer out = java.nio.ByteBuffer.allocate(3 * 3 * 3);
    new AntialiasedResize()
        .resize(
            java.nio.ByteBuffer.wrap(noise(id)),
            SHAPE.width(),
            3,
            plan,
            3,
            3,
            rng.nextBoolean(),
            out,
            0);
    return out.array();
  }

  private static LoaderSpec cropping(
      int workers, LoaderSpec.Sampling sampling, int rank, int world) {
    return new LoaderSpec(
        8,
        workers,
        3,
        sampling,
        new LoaderSpec.SampleAugmentation(0, true, CROP),
        new LoaderSpec.Rank(rank, world));
  }

  /** The samples of batches of 3x3x3 crops, by id: each the crop of exactly one id this epoch. */
  private static List<Long> cropIds(List<byte[]> batches, int epoch) {
    Map<String, Long> byPixels = new HashMap<>();
    for (int s = 0; s < SIZES.length; s++) {
      for (int r = 0; r < SIZES[s]; r++) {
        long id = s * 1000L + r;
        assertNull(byPixels.put(Arrays.toString(resizedCrop(id, epoch)), id), "crops collide");
      }
    }
    List<Long> ids = new ArrayList<>();
    for (byte[] batch : batches) {
      int n = batch.length / (27 + 4);
      for (int j = 0; j < n; j++) {
        Long id = byPixels.get(Arrays.toString(Arrays.copyOfRange(batch, j * 27, (j + 1) * 27)));
        assertNotNull(id, "sample " + j + " is no sample's crop of epoch " + epoch);
        ids.add(id);
      }
    }
    return ids;
  }

  @Test
  void resizedCropsAreEachSamplesOwnDrawsResampledAndFlipped() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards(DataLoaderTest::noise, 0, 1, 2);
        DataLoader loader =
            new DataLoader(
                backend,
                set,
                cropping(2, new LoaderSpec.Sampling(42, false, LoaderSpec.Remainder.KEEP), 0, 1))) {
      assertEquals(new ImageShape(3, 3, 3), loader.shape());
      DataLoader.Work before = loader.work();
      for (int epoch : new int[] {0, 5}) {
        List<Long> ids = cropIds(drain(loader, epoch), epoch);
        List<Long> inOrder = new ArrayList<>();
        for (int s = 0; s < SIZES.length; s++) {
          for (int r = 0; r < SIZES[s]; r++) {
            inOrder.add(s * 1000L + r);
          }
        }
        assertEquals(inOrder, ids, "epoch " + epoch);
      }
      assertFalse(
          Arrays.equals(resizedCrop(1003, 0), resizedCrop(1003, 5)), "a new crop every epoch");
      DataLoader.Work after = loader.work();
      assertEquals(2 * 40, after.samples() - before.samples(), "the workers' samples counted");
      assertTrue(after.nanos() > before.nanos(), "the workers' time counted");
      assertTrue(after.resizeMillisPerSampleSince(before) > 0, "crops timed");
      assertTrue(after.resizeNanos() <= after.nanos(), "cropping is part of the work");
    }
  }

  /**
   * The loader's rate is its workers' samples over their busy time, each worker counted (two
   * workers busy one second each for 300 samples make 300 a second, not 150); averages are per
   * sample; nothing done between two readings is no rate, not a division by zero.
   */
  @Test
  void workRatesAreSamplesOverTheWorkersBusyTime() {
    DataLoader.Work before = new DataLoader.Work(100, 1_000_000_000L, 10_000_000L, 0, 0, 2);
    DataLoader.Work after = new DataLoader.Work(400, 3_000_000_000L, 610_000_000L, 0, 0, 2);
    assertEquals(300.0, after.samplesPerSecondSince(before), 1e-9);
    assertEquals(2.0, after.resizeMillisPerSampleSince(before), 1e-12);
    assertEquals(0.0, after.decodeMillisPerSampleSince(before));
    assertEquals(0.0, before.samplesPerSecondSince(before));
    assertEquals(0.0, before.resizeMillisPerSampleSince(before));
  }

  @Test
  void resizedCropsResumeMidEpochAndSplitOverRanks() throws Exception {
    LoaderSpec.Sampling shuffled = new LoaderSpec.Sampling(42, true, LoaderSpec.Remainder.DROP);
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards(DataLoaderTest::noise, 0, 1, 2)) {
      List<byte[]> whole;
      try (DataLoader one = new DataLoader(backend, set, cropping(1, shuffled, 0, 1))) {
        whole = drain(one, 2);
      }
      try (DataLoader resumed = new DataLoader(backend, set, cropping(3, shuffled, 0, 1));
          DataLoader.Epoch e = resumed.epoch(2, 2)) {
        for (int i = 2; i < whole.size(); i++) {
          Batch b = e.next();
          byte[] pixels = new byte[b.size() * 27];
          b.pixels().asByteBuffer().get(pixels);
          assertArrayEquals(Arrays.copyOf(whole.get(i), pixels.length), pixels, "batch " + i);
          b.release();
        }
        assertNull(e.next());
      }
      // Two ranks: disjoint samples that together are the one-rank epoch's, crops alike.
      List<Long> all = cropIds(whole, 2);
      Set<Long> seen = new HashSet<>();
      for (int rank = 0; rank < 2; rank++) {
        try (DataLoader r = new DataLoader(backend, set, cropping(2, shuffled, rank, 2))) {
          for (Long id : cropIds(drain(r, 2), 2)) {
            assertTrue(seen.add(id), "sample " + id + " on two ranks");
          }
        }
      }
      assertEquals(Set.copyOf(all.subList(0, seen.size())), seen);
    }
  }

  @Test
  void stallTimeIsMeasured() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards();
        DataLoader loader =
            new DataLoader(
                backend, set, options(1, 1, LoaderSpec.Remainder.DROP, 0, 1, 0, false))) {
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

  /**
   * A memory-mapped shard cut short mid-epoch (by another program) is named, and no batch holding
   * what its lost pages gave is handed out: the reads faulted in loader threads and surfaced as
   * IllegalMonitorStateException traces, then as a garbage label with no shard named.
   */
  @Test
  void aMappedShardCutShortMidEpochIsNamedAndItsBatchNotUsed() throws Exception {
    try (Backend backend = new CpuBackend(1);
        ShardSet set = shards();
        DataLoader loader =
            new DataLoader(
                backend, set, options(2, 2, LoaderSpec.Remainder.DROP, 0, 1, 0, false))) {
      drain(loader, 0);
      Path cut = tmp.resolve("s2.arrow");
      long size = Files.size(cut);
      try (var channel =
          java.nio.channels.FileChannel.open(cut, java.nio.file.StandardOpenOption.WRITE)) {
        channel.truncate(0);
      }
      ShardChangedException e =
          org.junit.jupiter.api.Assertions.assertThrows(
              ShardChangedException.class, () -> drain(loader, 1));
      assertEquals(
          cut
              + ": cut to 0 bytes while it was read ("
              + size
              + " when opened): a dataset must not"
              + " change while it is read; preprocess writes a new version beside it",
          e.getMessage());
    }
  }
}
