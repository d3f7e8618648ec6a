package dev.ramtrain.etl.source;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.ramtrain.etl.dataset.NonLocalFileSystemTest;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class SampleBytesTest {
  @TempDir Path tmp;

  private static final byte[] BYTES = {(byte) 0xFF, (byte) 0xD8, 1, 2, 3, 4, 5, 6, 7};

  private static Configuration conf() {
    return NonLocalFileSystemTest.conf();
  }

  private RawSample unread(String scheme, Path file) {
    // Hadoop's path strings are not URI-escaped: a space stays a space.
    return RawSample.unread("a/" + file.getFileName(), scheme + ":" + file, 1, null);
  }

  @Test
  void readsLocalAndRemoteFilesWhole() throws Exception {
    Path file = tmp.resolve("with space.jpg");
    Files.write(file, BYTES);
    for (String scheme : new String[] {"file", "other"}) {
      RawSample read = SampleBytes.read(unread(scheme, file), conf(), BYTES.length);
      assertArrayEquals(BYTES, read.content(), scheme);
      assertEquals(1, read.label());
      assertEquals("a/with space.jpg", read.key());
    }
    RawSample inline = RawSample.encoded("k", BYTES, 0, null);
    assertSame(inline, SampleBytes.read(inline, conf(), 1));
  }

  @Test
  void aFileOverTheLimitIsRejectedWithoutReadingItWhole() throws Exception {
    Path file = tmp.resolve("big.jpg");
    Files.write(file, BYTES);
    var local =
        assertThrows(
            RejectedImageException.class,
            () -> SampleBytes.read(unread("file", file), conf(), BYTES.length - 1));
    assertEquals(RejectReason.TOO_LARGE, local.reason());
    assertEquals("9 bytes exceeds ramtrain.etl.max-file-bytes=8", local.getMessage());
    var remote =
        assertThrows(
            RejectedImageException.class,
            () -> SampleBytes.read(unread("other", file), conf(), BYTES.length - 1));
    assertEquals(RejectReason.TOO_LARGE, remote.reason());
    assertEquals("more than ramtrain.etl.max-file-bytes=8", remote.getMessage());
  }

  @Test
  void aFileGoneSinceTheListingIsRejected() {
    Path file = tmp.resolve("gone.jpg");
    for (String scheme : new String[] {"file", "other"}) {
      var e =
          assertThrows(
              RejectedImageException.class,
              () -> SampleBytes.read(unread(scheme, file), conf(), 100));
      assertEquals(RejectReason.UNREADABLE, e.reason(), scheme);
    }
  }

  /** A named pipe or a device is rejected at once, never opened: a read would block or not end. */
  @Test
  @Timeout(30)
  void whatIsNotARegularFileIsRejectedUnread() throws Exception {
    Path fifo = tmp.resolve("x.jpg");
    Process mkfifo = new ProcessBuilder("mkfifo", fifo.toString()).start();
    assumeTrue(mkfifo.waitFor() == 0, "mkfifo");
    for (Path special : new Path[] {fifo, Path.of("/dev/zero")}) {
      var e =
          assertThrows(
              RejectedImageException.class,
              () -> SampleBytes.read(unread("file", special), conf(), 100));
      assertEquals(RejectReason.UNREADABLE, e.reason(), special.toString());
      assertTrue(e.getMessage().contains("not a regular file"), e.getMessage());
    }
  }
}
