package dev.ramtrain.etl.dataset;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
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

  @Test
  void usesDirectIoWhereTheFilesystemAllowsIt() throws IOException {
    Path file = dir.resolve("probe");
    try (WritableByteChannel out = DirectFileChannel.create(file, BUFFER)) {
      assumeTrue(out instanceof DirectFileChannel, "no O_DIRECT on the test's temporary folder");
    }
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
