package dev.ramtrain.etl.dataset;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.sun.nio.file.ExtendedOpenOption;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class DirectFileChannelTest {
  /** Small buffers, so a few hundred KiB cross many buffer swaps and background writes. */
  private static final int BUFFER = 64 << 10;

  @TempDir Path dir;

  /** Lengths around the block and buffer edges, written in chunks of every size up to 3 buffers. */
  @ParameterizedTest
  @ValueSource(ints = {0, 1, 4095, 4096, 4097, BUFFER - 1, BUFFER, BUFFER + 1, 5 * BUFFER + 777})
  void writesExactlyTheBytesGiven(int length) throws IOException {
    byte[] expected = new byte[length];
    new Random(length).nextBytes(expected);
    Path file = dir.resolve("shard.arrow");
    Random chunks = new Random(7);
    try (WritableByteChannel out = DirectFileChannel.create(file, BUFFER)) {
      int at = 0;
      while (at < length) {
        int n = Math.min(length - at, chunks.nextInt(3 * BUFFER) + 1);
        // Off-heap sources, as Arrow hands them over, and heap ones.
        ByteBuffer chunk =
            chunks.nextBoolean() ? ByteBuffer.allocateDirect(n) : ByteBuffer.allocate(n);
        chunk.put(expected, at, n).flip();
        assertEquals(n, out.write(chunk));
        assertFalse(chunk.hasRemaining());
        at += n;
      }
    }
    assertArrayEquals(expected, Files.readAllBytes(file));
  }

  /**
   * Direct I/O exactly where the filesystem opens files with {@code O_DIRECT} (asked here apart
   * from the channel), the page cache elsewhere; the bytes are the same either way.
   */
  @Test
  void usesDirectIoWhereTheFilesystemAllowsIt() throws IOException {
    boolean directOpens;
    try (FileChannel probe =
        FileChannel.open(
            dir.resolve("probe"),
            StandardOpenOption.WRITE,
            StandardOpenOption.CREATE_NEW,
            ExtendedOpenOption.DIRECT)) {
      // Aligned writes need the buffer to be whole blocks.
      long block = Files.getFileStore(dir).getBlockSize();
      directOpens = block > 0 && BUFFER % block == 0;
    } catch (IOException | UnsupportedOperationException e) {
      directOpens = false;
    }
    Path file = dir.resolve("shard.arrow");
    byte[] bytes = new byte[BUFFER + 3];
    new Random(3).nextBytes(bytes);
    try (WritableByteChannel out = DirectFileChannel.create(file, BUFFER)) {
      assertEquals(directOpens, out instanceof DirectFileChannel, "direct I/O chosen");
      assertEquals(!directOpens, out instanceof FileChannel, "the page cache chosen");
      out.write(ByteBuffer.wrap(bytes));
    }
    assertArrayEquals(bytes, Files.readAllBytes(file));
  }

  /** The page-cache path the channel falls back to writes the same bytes, and replaces alike. */
  @Test
  void theBufferedFallbackReplacesAnExistingFileWholly() throws IOException {
    Path file = dir.resolve("buffered.arrow");
    Files.write(file, new byte[3 * BUFFER]);
    try (FileChannel out = DirectFileChannel.createBuffered(file)) {
      out.write(ByteBuffer.wrap(new byte[] {4, 5}));
    }
    assertArrayEquals(new byte[] {4, 5}, Files.readAllBytes(file));
  }

  @Test
  void replacesAnExistingFileWholly() throws IOException {
    Path file = dir.resolve("retried.arrow");
    Files.write(file, new byte[3 * BUFFER]);
    try (WritableByteChannel out = DirectFileChannel.create(file, BUFFER)) {
      out.write(ByteBuffer.wrap(new byte[] {1, 2, 3}));
    }
    assertArrayEquals(new byte[] {1, 2, 3}, Files.readAllBytes(file));
  }

  @Test
  void neverCreatesFolders() {
    // A run folder the driver removed must fail the task, not be made again.
    assertThrows(
        NoSuchFileException.class,
        () -> DirectFileChannel.create(dir.resolve("gone/shard.arrow"), BUFFER).close());
    assertFalse(Files.exists(dir.resolve("gone")));
  }

  @Test
  void refusesWritesAfterClose() throws IOException {
    WritableByteChannel out = DirectFileChannel.create(dir.resolve("closed"), BUFFER);
    out.close();
    out.close(); // a second close does nothing
    assertFalse(out.isOpen());
    assertThrows(ClosedChannelException.class, () -> out.write(ByteBuffer.allocate(1)));
  }

  @Test
  void anInterruptedWriterStillReleasesEverything() throws Exception {
    Path file = dir.resolve("interrupted");
    WritableByteChannel out = DirectFileChannel.create(file, BUFFER);
    ByteBuffer chunk = ByteBuffer.allocateDirect(BUFFER);
    Thread.currentThread().interrupt();
    try {
      // A Spark task killed mid-shard: the write or the close fails, neither hangs, and the
      // buffers are freed only after the background write returned (the allocator checks).
      assertThrows(
          IOException.class,
          () -> {
            for (int i = 0; i < 8; i++) {
              out.write(chunk.clear());
            }
            out.close();
          });
    } finally {
      Thread.interrupted();
      out.close();
    }
  }
}
