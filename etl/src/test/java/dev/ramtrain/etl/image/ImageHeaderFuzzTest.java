package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_WEBP_QUALITY;

import dev.ramtrain.etl.source.RejectedImageException;
import java.nio.charset.StandardCharsets;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The header probe on arbitrary bytes behind each format's magic (and on mangled copies of real
 * WebP and TIFF files): it returns a header or rejects the input; it never fails otherwise (an
 * index out of bounds, a negative size, a huge allocation from a hostile count).
 */
class ImageHeaderFuzzTest {
  private static final byte[][] MAGIC = {
    "RIFF\0\0\0\0WEBPVP8 ".getBytes(StandardCharsets.US_ASCII),
    "RIFF\0\0\0\0WEBPVP8L".getBytes(StandardCharsets.US_ASCII),
    "RIFF\0\0\0\0WEBPVP8X".getBytes(StandardCharsets.US_ASCII),
    {'I', 'I', 42, 0},
    {'M', 'M', 0, 42},
    {(byte) 0xFF, (byte) 0xD8, (byte) 0xFF},
    {(byte) 0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A},
  };

  @Property(tries = 2000)
  void arbitraryBytesAfterAMagicAreReadOrRejected(
      @ForAll @IntRange(min = 0, max = 6) int format,
      @ForAll @Size(max = 300) byte[] rest,
      @ForAll boolean declareTheSize) {
    byte[] magic = MAGIC[format];
    byte[] bytes = new byte[magic.length + rest.length];
    System.arraycopy(magic, 0, bytes, 0, magic.length);
    System.arraycopy(rest, 0, bytes, magic.length, rest.length);
    if (declareTheSize && format <= 2) { // a RIFF size that fits, to reach the chunk parsers
      int size = bytes.length - 8;
      bytes[4] = (byte) size;
      bytes[5] = (byte) (size >> 8);
    }
    probe(bytes);
  }

  @Property(tries = 1000)
  void mangledRealFilesAreReadOrRejected(
      @ForAll boolean tiff,
      @ForAll @IntRange(min = 0, max = 4000) int at,
      @ForAll byte value,
      @ForAll @IntRange(min = 0, max = 4000) int cut) {
    byte[] real = tiff ? Fixtures.TIFF : Fixtures.WEBP;
    byte[] bytes = java.util.Arrays.copyOf(real, Math.max(1, real.length - cut % real.length));
    bytes[at % bytes.length] = value;
    probe(bytes);
  }

  private static void probe(byte[] bytes) {
    try {
      ImageHeader.probe(bytes, 89_478_485);
    } catch (RejectedImageException expected) {
      // rejected with a reason: what bad input gets
    }
  }

  /** Real files to mangle, encoded once. */
  private static final class Fixtures {
    static final byte[] WEBP = Encoded.openCv(".webp", 3, IMWRITE_WEBP_QUALITY, 101);
    static final byte[] TIFF = Encoded.openCv(".tiff", 3);
  }
}
