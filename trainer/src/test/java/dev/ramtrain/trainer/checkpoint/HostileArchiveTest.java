package dev.ramtrain.trainer.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code torch.save} archives built to take the process down with a few bytes (a view expanding one
 * float to a billion, strides and offsets that overflow, shapes whose product overflows, one
 * storage read many times over, a compressed entry that inflates past its file): each is one
 * IOException naming the file before the memory is asked for; and a fuzz over those structures
 * (sizes, strides, offsets, element counts from the edges of the long range) where every outcome is
 * tensors no larger than what the file holds allows, or such an exception.
 */
class HostileArchiveTest {
  @TempDir Path tmp;

  /** One tensor: {@code _rebuild_tensor_v2} over storage {@code key} of {@code numel} floats. */
  record View(String name, String key, long numel, long offset, long[] size, long[] stride) {}

  /** A torch.save archive of {@code views} over storages of {@code storageBytes} bytes each. */
  static byte[] archive(List<View> views, int storageBytes, boolean compressed) throws IOException {
    ByteArrayOutputStream zip = new ByteArrayOutputStream();
    try (ZipOutputStream z = new ZipOutputStream(zip)) {
      entry(z, "a/data.pkl", pickle(views), compressed);
      for (String key : views.stream().map(View::key).distinct().toList()) {
        entry(z, "a/data/" + key, new byte[storageBytes], compressed);
      }
      entry(z, "a/version", "3\n".getBytes(StandardCharsets.US_ASCII), false);
    }
    return zip.toByteArray();
  }

  private static void entry(ZipOutputStream z, String name, byte[] bytes, boolean compressed)
      throws IOException {
    ZipEntry e = new ZipEntry(name);
    if (!compressed) {
      CRC32 crc = new CRC32();
      crc.update(bytes);
      e.setMethod(ZipEntry.STORED);
      e.setSize(bytes.length);
      e.setCompressedSize(bytes.length);
      e.setCrc(crc.getValue());
    }
    z.putNextEntry(e);
    z.write(bytes);
    z.closeEntry();
  }

  /** Protocol 2: OrderedDict((name, _rebuild_tensor_v2(storage, offset, size, stride, ...))). */
  static byte[] pickle(List<View> views) {
    ByteArrayOutputStream p = new ByteArrayOutputStream();
    p.write(0x80);
    p.write(2);
    orderedDict(p);
    p.write('(');
    for (View v : views) {
      text(p, v.name());
      global(p, "torch._utils", "_rebuild_tensor_v2");
      p.write('(');
      p.write('(');
      text(p, "storage");
      global(p, "torch", "FloatStorage");
      text(p, v.key());
      text(p, "cpu");
      integer(p, v.numel());
      p.write('t');
      p.write('Q'); // BINPERSID
      integer(p, v.offset());
      tuple(p, v.size());
      tuple(p, v.stride());
      p.write(0x89); // False
      orderedDict(p);
      p.write('t');
      p.write('R');
    }
    p.write('u'); // SETITEMS
    p.write('.');
    return p.toByteArray();
  }

  private static void orderedDict(ByteArrayOutputStream p) {
    global(p, "collections", "OrderedDict");
    p.write(')');
    p.write('R');
  }

  private static void global(ByteArrayOutputStream p, String module, String name) {
    p.write('c');
    p.writeBytes((module + "\n" + name + "\n").getBytes(StandardCharsets.US_ASCII));
  }

  private static void text(ByteArrayOutputStream p, String s) {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    p.write('X');
    p.writeBytes(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(b.length).array());
    p.writeBytes(b);
  }

  private static void integer(ByteArrayOutputStream p, long v) {
    p.write(0x8a); // LONG1, 8 bytes of two's complement
    p.write(8);
    p.writeBytes(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array());
  }

  private static void tuple(ByteArrayOutputStream p, long[] values) {
    p.write('(');
    for (long v : values) {
      integer(p, v);
    }
    p.write('t');
  }

  private Path write(String name, byte[] bytes) throws IOException {
    Path file = tmp.resolve(name);
    try (OutputStream out = Files.newOutputStream(file)) {
      out.write(bytes);
    }
    return file;
  }

  private IOException refused(String name, List<View> views, int storageBytes, boolean compressed)
      throws IOException {
    Path file = write(name, archive(views, storageBytes, compressed));
    IOException e = assertThrows(IOException.class, () -> TorchArchive.read(file));
    assertTrue(e.getMessage().startsWith(file.toString()), e.getMessage());
    assertFalse(e.getMessage().contains("\n"), e.getMessage());
    return e;
  }

  private static View view(long numel, long offset, long[] size, long[] stride) {
    return new View("w", "0", numel, offset, size, stride);
  }

  @Test
  void aWellFormedArchiveOfTheBuilderReads() throws IOException {
    Path file =
        write(
            "ok.pth",
            archive(List.of(view(6, 0, new long[] {2, 3}, new long[] {3, 1})), 24, false));
    Map<String, Safetensors.Tensor> t = TorchArchive.read(file);
    assertEquals(6, t.get("w").values().length);
  }

  /**
   * A tensor nobody asks for is never read: its storage here claims far more than its entry holds,
   * which reading the whole archive refuses, and the tensor asked for reads beside it.
   */
  @Test
  void onlyTheTensorsAskedForAreRead() throws IOException {
    View asked = new View("asked", "0", 4, 0, new long[] {4}, new long[] {1});
    View foreign = new View("foreign", "1", 100, 0, new long[] {100}, new long[] {1});
    Path file = write("foreign.pth", archive(List.of(asked, foreign), 16, false));
    assertThrows(IOException.class, () -> TorchArchive.read(file));
    StoredTensors stored = TorchArchive.index(file);
    assertArrayEquals(new long[] {100}, stored.shapes().get("foreign"));
    Map<String, float[]> read = stored.read(java.util.Set.of("asked"));
    assertEquals(java.util.Set.of("asked"), read.keySet());
    assertArrayEquals(new float[4], read.get("asked"));
  }

  @Test
  void aViewExpandingOneFloatToABillionIsRefused() throws IOException {
    IOException e =
        refused(
            "expand.pth",
            List.of(view(1, 0, new long[] {1_000_000_000}, new long[] {0})),
            4,
            false);
    assertTrue(e.getMessage().contains("an expanded view, not a weight"), e.getMessage());
  }

  @Test
  void stridesOffsetsAndShapesThatOverflowAreRefused() throws IOException {
    long big = 1L << 62;
    for (View v :
        List.of(
            view(10, 0, new long[] {3}, new long[] {big + 1000}),
            view(10, 0, new long[] {2}, new long[] {big}), // wrapped to an accepted view before
            view(10, Long.MAX_VALUE - 1, new long[] {2}, new long[] {1}),
            view(10, 0, new long[] {1L << 40, 1L << 40}, new long[] {1, 1}),
            view(10, -1, new long[] {2}, new long[] {1}),
            view(10, 0, new long[] {2}, new long[] {-1}))) {
      IOException e = refused("overflow.pth", List.of(v), 40, false);
      assertTrue(
          e.getMessage().contains("impossible view")
              || e.getMessage().contains("reaches element")
              || e.getMessage().contains("elements from a storage")
              || e.getMessage().contains("the pickle has a tensor of size [2], stride [")
              || e.getMessage().contains("the pickle has a shape with"),
          e.getMessage());
    }
  }

  @Test
  void oneStorageReadManyTimesOverIsRefused() throws IOException {
    List<View> views =
        java.util.stream.IntStream.range(0, 6)
            .mapToObj(i -> new View("w" + i, "0", 1000, 0, new long[] {1000}, new long[] {1}))
            .toList();
    IOException e = refused("repeat.pth", views, 4000, false);
    assertTrue(e.getMessage().contains("times what the file holds"), e.getMessage());
  }

  @Test
  void aCompressedEntryIsRefusedBeforeItInflates() throws IOException {
    IOException e =
        refused(
            "zipped.pth",
            List.of(view(1_000_000, 0, new long[] {1_000_000}, new long[] {1})),
            4_000_000,
            true);
    assertTrue(
        e.getMessage().contains("is compressed, which torch.save never does"), e.getMessage());
  }

  @Test
  void aStorageBeyondOneArrayIsRefusedNotCastNegative() throws IOException {
    long numel = 1L << 30; // 4 GiB of floats: within the pickle's bound, beyond one array
    IOException e =
        refused("huge.pth", List.of(view(numel, 0, new long[] {2}, new long[] {1})), 8, false);
    assertTrue(e.getMessage().contains("are read in one piece"), e.getMessage());
  }

  private static final long[] EDGES = {
    0,
    1,
    2,
    3,
    7,
    1000,
    -1,
    Integer.MAX_VALUE,
    1L << 31,
    1L << 32,
    1L << 40,
    1L << 62,
    (1L << 62) + 1000,
    Long.MAX_VALUE - 1,
    Long.MAX_VALUE,
    Long.MIN_VALUE
  };

  private static long pick(Random rng) {
    return rng.nextInt(3) == 0 ? rng.nextInt(64) : EDGES[rng.nextInt(EDGES.length)];
  }

  /**
   * Random views over small storages, their numbers from the edges of the long range: every archive
   * reads into tensors of at most what it holds (each no more elements than its storage, all
   * together no more than four times the storages) or is one IOException naming the file.
   */
  @Test
  void randomViewsReadWithinTheFileOrFailNamingIt() throws IOException {
    Random rng = new Random(44);
    int read = 0;
    for (int round = 0; round < 400; round++) {
      int storageFloats = rng.nextInt(64) + 1;
      List<View> views =
          java.util.stream.IntStream.range(0, rng.nextInt(3) + 1)
              .mapToObj(
                  i -> {
                    int dims = rng.nextInt(4);
                    long[] size = new long[dims];
                    long[] stride = new long[dims];
                    for (int d = 0; d < dims; d++) {
                      size[d] = pick(rng);
                      stride[d] = pick(rng);
                    }
                    long numel = rng.nextBoolean() ? storageFloats : pick(rng);
                    return new View("w" + i, "s" + rng.nextInt(2), numel, pick(rng), size, stride);
                  })
              .toList();
      Path file = write("fuzz-" + round + ".pth", archive(views, 4 * storageFloats, false));
      try {
        Map<String, Safetensors.Tensor> t = TorchArchive.read(file);
        long elements = t.values().stream().mapToLong(x -> x.values().length).sum();
        assertTrue(elements <= 4L * 2 * storageFloats, file + ": " + elements + " elements");
        read++;
      } catch (IOException e) {
        assertTrue(e.getMessage().startsWith(file.toString()), e.getMessage());
        assertFalse(e.getMessage().contains("\n"), e.getMessage());
      } catch (RuntimeException | Error e) {
        fail(file + ": " + e, e);
      }
      Files.delete(file);
    }
    assertTrue(read > 0 && read < 400, read + " of 400 read: the fuzz reached both outcomes");
  }
}
