package dev.ramtrain.trainer.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ShardReader;
import dev.ramtrain.format.ShardSchema;
import dev.ramtrain.format.ShardWriter;
import dev.ramtrain.trainer.backend.Backend;
import dev.ramtrain.trainer.backend.cpu.CpuBackend;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Shards read a window at a time: every sample once per epoch in an order that keeps to a window,
 * the same batches resumed or split over ranks, and the memory the shards take bounded by two
 * windows however large the dataset.
 */
class WindowedLoaderTest {
  private static final ImageShape SHAPE = new ImageShape(4, 4, 3);
  @TempDir Path tmp;

  /** Shard files read with plain reads, their checksums checked: a dataset's, in a test. */
  record FileShards(ShardSchema schema, List<Path> files, List<Long> rows, List<Long> crcs)
      implements ShardSource {
    @Override
    public int count() {
      return files.size();
    }

    @Override
    public long rows(int shard) {
      return rows.get(shard);
    }

    @Override
    public long bytes(int shard) {
      try {
        return Files.size(files.get(shard));
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }

    @Override
    public String name(int shard) {
      return files.get(shard).toString();
    }

    @Override
    public ShardReader read(int shard, ByteBuffer into) throws IOException {
      try (FileChannel in = FileChannel.open(files.get(shard))) {
        ByteBuffer target = into.duplicate().limit((int) in.size());
        while (target.hasRemaining() && in.read(target) >= 0) {}
        return ShardReader.open(name(shard), target.flip(), crcs.get(shard));
      }
    }
  }

  /** {@code shards} shards of {@code rows} samples; sample id s*1000+r, its pixels from its id. */
  private FileShards write(int shards, int rows, ShapeOf shape) throws Exception {
    ShardSchema schema = new ShardSchema(shape.shape(), List.of("a", "b", "c"));
    List<Path> files = new ArrayList<>();
    List<Long> counts = new ArrayList<>();
    List<Long> crcs = new ArrayList<>();
    for (int s = 0; s < shards; s++) {
      Path file = tmp.resolve("w" + s + ".arrow");
      try (OutputStream out = Files.newOutputStream(file);
          ShardWriter w = new ShardWriter(schema, out, shape.shape().bytes() * 3L)) {
        for (int r = 0; r < rows; r++) {
          long id = s * 1000L + r;
          w.append(id, (int) (id % 3), shape.pixels(id));
        }
        crcs.add(w.finish().crc32c());
      }
      files.add(file);
      counts.add((long) rows);
    }
    return new FileShards(schema, files, counts, crcs);
  }

  /** Image shape and pixels named by the sample id (its first 8 bytes), the rest constant. */
  record ShapeOf(ImageShape shape) {
    byte[] pixels(long id) {
      byte[] p = new byte[shape.bytes()];
      ByteBuffer.wrap(p).putLong(id);
      return p;
    }
  }

  private static final ShapeOf SMALL = new ShapeOf(SHAPE);

  private static LoaderSpec options(int batch, LoaderSpec.Remainder rest, LoaderSpec.Rank rank) {
    return new LoaderSpec(
        batch,
        2,
        3,
        new LoaderSpec.Sampling(7, true, rest),
        LoaderSpec.SampleAugmentation.NONE,
        rank);
  }

  private static DataLoader windowed(Backend backend, ShardSource source, int w, LoaderSpec o) {
    return new DataLoader(
        backend, ShardSet.windowed(source, w), o, AntialiasedResize::new, null, BadSamples.FAIL);
  }

  /** The ids of an epoch's samples, in order. */
  private static List<Long> ids(List<byte[]> batches, int imageBytes) {
    List<Long> ids = new ArrayList<>();
    for (byte[] batch : batches) {
      int n = batch.length / (imageBytes + 4);
      for (int j = 0; j < n; j++) {
        ids.add(ByteBuffer.wrap(batch, j * imageBytes, 8).getLong());
      }
    }
    return ids;
  }

  @Test
  void everySampleOnceInAnOrderThatKeepsToAWindow() throws Exception {
    FileShards source = write(9, 11, SMALL);
    try (Backend backend = new CpuBackend(1);
        DataLoader loader =
            windowed(
                backend,
                source,
                2,
                options(5, LoaderSpec.Remainder.KEEP, LoaderSpec.Rank.SINGLE))) {
      List<Long> e0 = ids(DataLoaderTest.drain(loader, 0), SHAPE.bytes());
      List<Long> e1 = ids(DataLoaderTest.drain(loader, 1), SHAPE.bytes());
      assertEquals(99, e0.size());
      assertEquals(99, new HashSet<>(e0).size(), "each sample once");
      assertEquals(new HashSet<>(e0), new HashSet<>(e1));
      assertNotEquals(e0, e1, "a new order every epoch");
      // Windows of 2 shards (the last of 1): each run of 22 samples comes from 2 shards only,
      // all of their rows, shuffled among them.
      for (int start = 0; start < 88; start += 22) {
        Set<Long> shards = new HashSet<>();
        for (long id : e0.subList(start, start + 22)) {
          shards.add(id / 1000);
        }
        assertEquals(2, shards.size(), "window at " + start + ": " + shards);
      }
      assertTrue(loader.peakWindowBytes() <= loader.shardMemoryBytes());
    }
  }

  @Test
  void resumedEpochsAndRanksSeeTheBatchesOfOne() throws Exception {
    FileShards source = write(6, 13, SMALL);
    try (Backend backend = new CpuBackend(1)) {
      List<byte[]> whole;
      try (DataLoader one =
          windowed(
              backend, source, 2, options(4, LoaderSpec.Remainder.PAD, LoaderSpec.Rank.SINGLE))) {
        whole = DataLoaderTest.drain(one, 3);
      }
      assertEquals(20, whole.size(), "78 samples padded to 20 batches of 4");
      try (DataLoader resumed =
              windowed(
                  backend,
                  source,
                  2,
                  options(4, LoaderSpec.Remainder.PAD, LoaderSpec.Rank.SINGLE));
          DataLoader.Epoch e = resumed.epoch(3, 9)) {
        for (int i = 9; i < whole.size(); i++) {
          Batch b = e.next();
          byte[] got = new byte[b.size() * SHAPE.bytes()];
          b.pixels().asByteBuffer().get(got);
          assertArrayEquals(java.util.Arrays.copyOf(whole.get(i), got.length), got, "batch " + i);
          b.release();
        }
      }
      // Two ranks of batches of 2 share the order: rank r takes half r of each batch of 4.
      List<Long> all = ids(whole, SHAPE.bytes());
      for (int rank = 0; rank < 2; rank++) {
        try (DataLoader r =
            windowed(
                backend,
                source,
                2,
                options(2, LoaderSpec.Remainder.PAD, new LoaderSpec.Rank(rank, 2)))) {
          List<Long> mine = ids(DataLoaderTest.drain(r, 3), SHAPE.bytes());
          assertEquals(40, mine.size());
          for (int i = 0; i < mine.size(); i++) {
            assertEquals(all.get((i / 2) * 4 + rank * 2 + i % 2), mine.get(i), "rank " + rank);
          }
        }
      }
    }
  }

  /**
   * A dataset four times the page budget (two windows of one shard): an epoch sees every sample
   * once while the memory the shards take stays within the budget, by the loader's count exactly,
   * and by the process's resident set: it grows by about the budget, not by the dataset as it does
   * with the same shards all mapped (the bound is the midpoint between the two, so the JVM's own
   * few megabytes cannot decide it).
   */
  @Test
  void aDatasetFourTimesTheBudgetTrainsWithinIt() throws Exception {
    ShapeOf large = new ShapeOf(new ImageShape(256, 256, 3)); // 196,608 bytes an image
    FileShards source = write(8, 20, large); // 8 shards of 3.9 MB: 31.5 MB
    long dataset = 0;
    for (int s = 0; s < source.count(); s++) {
      dataset += source.bytes(s);
    }
    LoaderSpec o = options(5, LoaderSpec.Remainder.KEEP, LoaderSpec.Rank.SINGLE);
    try (Backend backend = new CpuBackend(1)) {
      long budget;
      long windowedGrowth;
      try (DataLoader loader = windowed(backend, source, 1, o)) {
        budget = loader.shardMemoryBytes();
        assertEquals(2 * source.bytes(0), budget, "two windows of one shard");
        assertEquals(dataset, 4 * budget, "the dataset is four budgets");
        ResidentSet rss = ResidentSet.watch();
        Set<Long> seen = idsWithoutCopying(loader, large.shape().bytes());
        windowedGrowth = rss.stop();
        assertEquals(160, seen.size(), "every sample once");
        assertTrue(loader.peakWindowBytes() <= budget, loader.peakWindowBytes() + " > " + budget);
      }
      long mappedGrowth;
      List<ShardReader> readers = new ArrayList<>();
      for (Path f : source.files()) {
        readers.add(ShardReader.open(f, null));
      }
      try (ShardSet all = new ShardSet(large.shape(), source.schema().classes(), readers);
          DataLoader mapped = new DataLoader(backend, all, o)) {
        ResidentSet rss = ResidentSet.watch();
        idsWithoutCopying(mapped, large.shape().bytes());
        mappedGrowth = rss.stop();
      }
      long midpoint = (budget + dataset) / 2;
      assertTrue(
          windowedGrowth < midpoint,
          "windowed: the resident set grew " + windowedGrowth + " for a budget of " + budget);
      assertTrue(
          mappedGrowth > midpoint,
          "mapped: the resident set grew only " + mappedGrowth + " for a dataset of " + dataset);
    }
  }

  /** The sample ids of epoch 0, read from the staging slots without copying any pixels. */
  private static Set<Long> idsWithoutCopying(DataLoader loader, int imageBytes) {
    Set<Long> ids = new HashSet<>();
    try (DataLoader.Epoch e = loader.epoch(0)) {
      Batch b;
      while ((b = e.next()) != null) {
        ByteBuffer pixels = b.pixels().asByteBuffer();
        for (int j = 0; j < b.size(); j++) {
          ids.add(pixels.getLong(j * imageBytes));
        }
        b.release();
      }
    }
    return ids;
  }

  @Test
  void aRankWindowsItsOwnShardsInAnOrderOfItsOwn() throws Exception {
    FileShards source = write(6, 9, SMALL); // this rank's own 54 samples
    LoaderSpec rank0 = options(4, LoaderSpec.Remainder.DROP, LoaderSpec.Rank.owning(0, 2, 40));
    LoaderSpec rank1 = options(4, LoaderSpec.Remainder.DROP, LoaderSpec.Rank.owning(1, 2, 40));
    try (Backend backend = new CpuBackend(1);
        DataLoader a = windowed(backend, source, 2, rank0);
        DataLoader again = windowed(backend, source, 2, rank0);
        DataLoader other = windowed(backend, source, 2, rank1)) {
      List<Long> ids = ids(DataLoaderTest.drain(a, 1), SHAPE.bytes());
      assertEquals(40, ids.size(), "the share every rank takes");
      assertEquals(40, new HashSet<>(ids).size(), "no sample twice");
      assertEquals(ids, ids(DataLoaderTest.drain(again, 1), SHAPE.bytes()), "deterministic");
      assertNotEquals(
          ids, ids(DataLoaderTest.drain(other, 1), SHAPE.bytes()), "another rank, its own order");
    }
  }

  @Test
  void aShareLargerThanTheShardsWrapsAroundReadingThemAgain() throws Exception {
    FileShards source = write(2, 3, SMALL); // 6 own samples, a share of 20: three wraps
    LoaderSpec o = options(4, LoaderSpec.Remainder.PAD, LoaderSpec.Rank.owning(0, 2, 20));
    try (Backend backend = new CpuBackend(1);
        DataLoader loader = windowed(backend, source, 5, o)) {
      List<Long> ids = ids(DataLoaderTest.drain(loader, 0), SHAPE.bytes());
      assertEquals(20, ids.size());
      assertEquals(6, new HashSet<>(ids).size(), "every own sample, again and again");
      assertTrue(loader.peakWindowBytes() <= loader.shardMemoryBytes());
    }
  }

  @Test
  void normalizationReadsAWindowedSetShardByShardToTheSameMoments() throws Exception {
    FileShards source = write(5, 7, SMALL);
    List<ShardReader> readers = new ArrayList<>();
    for (Path f : source.files()) {
      readers.add(ShardReader.open(f, null));
    }
    try (ShardSet opened = new ShardSet(SHAPE, source.schema().classes(), readers)) {
      for (int max : new int[] {12, 1000}) {
        assertArrayEquals(
            Normalization.moments(opened, max),
            Normalization.moments(ShardSet.windowed(source, 2), max),
            "first " + max);
      }
    }
  }

  @Test
  void aDamagedShardFailsTheEpochNamingIt() throws Exception {
    FileShards source = write(4, 6, SMALL);
    byte[] bytes = Files.readAllBytes(source.files().get(2));
    bytes[bytes.length / 2] ^= 0x40;
    Files.write(source.files().get(2), bytes);
    try (Backend backend = new CpuBackend(1);
        DataLoader loader =
            windowed(
                backend,
                source,
                1,
                options(3, LoaderSpec.Remainder.KEEP, LoaderSpec.Rank.SINGLE))) {
      var e = assertThrows(RuntimeException.class, () -> DataLoaderTest.drain(loader, 0));
      assertTrue(e.getMessage().contains("w2.arrow"), e.getMessage());
      assertTrue(e.getMessage().contains("checksum mismatch"), e.getMessage());
    }
  }

  @Test
  void windowsSmallerThanABatchAreHeldAsManyAsABatchSpans() throws Exception {
    FileShards source = write(7, 2, SMALL); // windows of 2 samples, batches of 8: 5 windows a batch
    try (Backend backend = new CpuBackend(1);
        DataLoader loader =
            windowed(
                backend,
                source,
                1,
                options(8, LoaderSpec.Remainder.KEEP, LoaderSpec.Rank.SINGLE))) {
      // Eight consecutive samples of windows of two span five windows at most.
      assertEquals(5 * source.bytes(0), loader.shardMemoryBytes());
      List<Long> ids = ids(DataLoaderTest.drain(loader, 0), SHAPE.bytes());
      assertEquals(14, new HashSet<>(ids).size());
      assertTrue(loader.peakWindowBytes() <= loader.shardMemoryBytes());
    }
  }

  /** The process's resident set (VmRSS), sampled until stopped: how much it grew at most. */
  static final class ResidentSet {
    private final long before = now();
    private volatile long peak = before;
    private volatile boolean running = true;
    private final Thread sampler =
        new Thread(
            () -> {
              while (running) {
                peak = Math.max(peak, now());
                try {
                  Thread.sleep(2);
                } catch (InterruptedException e) {
                  return;
                }
              }
            });

    static ResidentSet watch() {
      ResidentSet r = new ResidentSet();
      r.sampler.setDaemon(true);
      r.sampler.start();
      return r;
    }

    long stop() throws InterruptedException {
      running = false;
      sampler.join();
      return Math.max(peak, now()) - before;
    }

    static long now() {
      try {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
          if (line.startsWith("VmRSS:")) {
            return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
          }
        }
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
      throw new IllegalStateException("no VmRSS in /proc/self/status");
    }
  }
}
