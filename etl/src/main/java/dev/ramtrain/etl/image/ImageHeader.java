package dev.ramtrain.etl.image;

import dev.ramtrain.etl.source.RejectReason;
import dev.ramtrain.etl.source.RejectedImageException;

/**
 * Format and pixel size read from an encoded image's header, before any decoding: enough to reject
 * decompression bombs cheaply, to pick a reduced-size JPEG decode, and to notice truncated files
 * that decoders would silently pad with grey.
 */
public record ImageHeader(
    Format format, int width, int height, int orientation, boolean progressive) {

  /** A header whose image is stored upright. */
  public ImageHeader(Format format, int width, int height) {
    this(format, width, height, ExifOrientation.UPRIGHT);
  }

  /** A header of a sequential (baseline) image. */
  public ImageHeader(Format format, int width, int height, int orientation) {
    this(format, width, height, orientation, false);
  }

  /** The image's size once turned upright ({@link ExifOrientation}). */
  public ImageHeader upright() {
    return ExifOrientation.swapsSides(orientation)
        ? new ImageHeader(format, height, width, ExifOrientation.UPRIGHT, progressive)
        : new ImageHeader(format, width, height, ExifOrientation.UPRIGHT, progressive);
  }

  /**
   * A sequential 8-bit JPEG (baseline or extended Huffman, not progressive, arithmetic or
   * lossless): one a shard may hold as it came, its regions decoding without the whole image.
   */
  public boolean sequentialJpeg() {
    return format == Format.JPEG && !progressive;
  }

  public enum Format {
    JPEG,
    PNG,
    BMP,
    GIF,
    WEBP,
    TIFF
  }

  public long pixels() {
    return (long) width * height;
  }

  /** Reads the header; rejects empty, non-image, truncated and oversized inputs. */
  public static ImageHeader probe(byte[] b, long maxPixels) throws RejectedImageException {
    if (b.length == 0) {
      throw new RejectedImageException(RejectReason.EMPTY_FILE, "zero-byte file");
    }
    ImageHeader header;
    if (startsWith(b, 0xFF, 0xD8, 0xFF)) {
      header = jpeg(b);
    } else if (startsWith(b, 0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A)) {
      header = png(b);
    } else if (startsWith(b, 'G', 'I', 'F', '8')) {
      header = gif(b);
    } else if (startsWith(b, 'B', 'M')) {
      header = bmp(b);
    } else if (startsWith(b, 'R', 'I', 'F', 'F') && hasAt(b, 8, 'W', 'E', 'B', 'P')) {
      header = webp(b);
    } else if (startsWith(b, 'I', 'I', 42, 0) || startsWith(b, 'M', 'M', 0, 42)) {
      header = tiff(b);
    } else {
      throw new RejectedImageException(
          RejectReason.NOT_AN_IMAGE, "not a JPEG, PNG, BMP, GIF, WebP or TIFF file");
    }
    if (header.width <= 0 || header.height <= 0) {
      throw new RejectedImageException(
          RejectReason.CORRUPT, "header gives size " + header.width + "x" + header.height);
    }
    if (header.pixels() > maxPixels) {
      throw new RejectedImageException(
          RejectReason.TOO_LARGE,
          header.width
              + "x"
              + header.height
              + " pixels exceeds the limit of "
              + maxPixels
              + " (decompression bomb?)");
    }
    return header;
  }

  private static ImageHeader jpeg(byte[] b) throws RejectedImageException {
    if (!endsWithJpegEoi(b)) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "JPEG has no end-of-image marker");
    }
    int i = 2;
    int orientation = ExifOrientation.UPRIGHT;
    while (i + 9 < b.length) {
      if ((b[i] & 0xFF) != 0xFF) {
        throw new RejectedImageException(RejectReason.CORRUPT, "JPEG marker expected at byte " + i);
      }
      int marker = b[i + 1] & 0xFF;
      if (marker == 0xFF) { // fill byte
        i++;
        continue;
      }
      int length = u16be(b, i + 2);
      boolean startOfFrame =
          marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
      if (startOfFrame) {
        boolean sequential = marker == 0xC0 || marker == 0xC1;
        if (!sequential) {
          requireFewScans(b, i);
        }
        return new ImageHeader(
            Format.JPEG, u16be(b, i + 7), u16be(b, i + 5), orientation, !sequential);
      }
      if (marker == 0xE1 && orientation == ExifOrientation.UPRIGHT) {
        orientation = ExifOrientation.fromApp1(b, i + 4, Math.min(b.length, i + 2 + length));
      }
      if (marker == 0xDA || length < 2) {
        break; // scan data before any frame header
      }
      i += 2 + length;
    }
    throw new RejectedImageException(RejectReason.CORRUPT, "JPEG has no frame header");
  }

  /**
   * The most scans a progressive JPEG may have: libjpeg writes 10 for colour, mozjpeg's optimized
   * scripts a few dozen; each scan decodes the whole image again, so a 359 KB file of 5,000 scans
   * took 140 s to decode.
   */
  static final int MAX_SCANS = 100;

  /**
   * Counts the start-of-scan markers from byte {@code from} on (in entropy-coded data a 0xFF byte
   * is followed by 0x00 or a restart marker, so every 0xFF 0xDA is one) and refuses more than
   * {@link #MAX_SCANS}.
   */
  private static void requireFewScans(byte[] b, int from) throws RejectedImageException {
    int scans = 0;
    for (int i = from; i + 1 < b.length; i++) {
      if ((b[i] & 0xFF) == 0xFF && (b[i + 1] & 0xFF) == 0xDA && ++scans > MAX_SCANS) {
        throw new RejectedImageException(
            RejectReason.CORRUPT,
            "progressive JPEG with more than "
                + MAX_SCANS
                + " scans (each decodes the whole image again: a decompression-time bomb?)");
      }
    }
  }

  private static boolean endsWithJpegEoi(byte[] b) {
    int end = b.length;
    while (end > 2 && b[end - 1] == 0) { // some writers pad after EOI
      end--;
    }
    return end >= 4 && (b[end - 2] & 0xFF) == 0xFF && (b[end - 1] & 0xFF) == 0xD9;
  }

  private static ImageHeader png(byte[] b) throws RejectedImageException {
    if (b.length < 33 || !hasAt(b, 12, 'I', 'H', 'D', 'R')) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "PNG ends before its IHDR chunk");
    }
    if (b.length < 45 || !hasAt(b, b.length - 8, 'I', 'E', 'N', 'D')) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "PNG has no IEND chunk at its end");
    }
    return new ImageHeader(Format.PNG, (int) u32be(b, 16), (int) u32be(b, 20));
  }

  private static ImageHeader gif(byte[] b) throws RejectedImageException {
    if (b.length < 14) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "GIF ends inside its header");
    }
    if ((b[b.length - 1] & 0xFF) != 0x3B) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "GIF has no trailer byte");
    }
    return new ImageHeader(Format.GIF, u16le(b, 6), u16le(b, 8));
  }

  private static ImageHeader bmp(byte[] b) throws RejectedImageException {
    if (b.length < 26) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "BMP ends inside its header");
    }
    long declared = u32le(b, 2);
    if (declared > b.length) {
      throw new RejectedImageException(
          RejectReason.TRUNCATED, "BMP declares " + declared + " bytes but has " + b.length);
    }
    return new ImageHeader(Format.BMP, (int) u32le(b, 18), Math.abs((int) u32le(b, 22)));
  }

  /**
   * WebP: a RIFF container whose declared size must fit the file, then a lossy (VP8), lossless
   * (VP8L) or extended (VP8X, the canvas size) first chunk.
   */
  private static ImageHeader webp(byte[] b) throws RejectedImageException {
    if (b.length < 30) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "WebP ends inside its header");
    }
    long declared = u32le(b, 4) + 8;
    if (declared > b.length) {
      throw new RejectedImageException(
          RejectReason.TRUNCATED, "WebP declares " + declared + " bytes but has " + b.length);
    }
    if (hasAt(b, 12, 'V', 'P', '8', ' ')) {
      if (!hasAt(b, 23, 0x9D, 0x01, 0x2A)) {
        throw new RejectedImageException(RejectReason.CORRUPT, "WebP VP8 frame has no start code");
      }
      return new ImageHeader(Format.WEBP, u16le(b, 26) & 0x3FFF, u16le(b, 28) & 0x3FFF);
    }
    if (hasAt(b, 12, 'V', 'P', '8', 'L')) {
      if ((b[20] & 0xFF) != 0x2F) {
        throw new RejectedImageException(RejectReason.CORRUPT, "WebP VP8L has no signature");
      }
      long bits = u32le(b, 21);
      return new ImageHeader(
          Format.WEBP, (int) (bits & 0x3FFF) + 1, (int) ((bits >>> 14) & 0x3FFF) + 1);
    }
    if (hasAt(b, 12, 'V', 'P', '8', 'X')) {
      return new ImageHeader(Format.WEBP, u24le(b, 24) + 1, u24le(b, 27) + 1);
    }
    throw new RejectedImageException(RejectReason.CORRUPT, "WebP has no VP8, VP8L or VP8X chunk");
  }

  private static final int TIFF_WIDTH = 256;
  private static final int TIFF_HEIGHT = 257;
  private static final int TIFF_STRIP_OFFSETS = 273;
  private static final int TIFF_STRIP_BYTES = 279;
  private static final int TIFF_TILE_OFFSETS = 324;
  private static final int TIFF_TILE_BYTES = 325;

  /**
   * TIFF (either byte order): the first image's size from its IFD; the image data its strips or
   * tiles point at must lie inside the file, else it was truncated.
   */
  private static ImageHeader tiff(byte[] b) throws RejectedImageException {
    boolean little = b[0] == 'I';
    if (b.length < 8) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "TIFF ends inside its header");
    }
    long ifd = u32(b, 4, little);
    if (ifd < 8 || ifd + 2 > b.length) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "TIFF directory lies past the end");
    }
    int entries = u16(b, (int) ifd, little);
    if (ifd + 2 + 12L * entries > b.length) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "TIFF directory runs past the end");
    }
    long width = 0;
    long height = 0;
    long[] offsets = null;
    long[] counts = null;
    for (int e = 0; e < entries; e++) {
      int at = (int) ifd + 2 + 12 * e;
      int tag = u16(b, at, little);
      if (tag == TIFF_WIDTH) {
        width = tiffValues(b, at, little)[0];
      } else if (tag == TIFF_HEIGHT) {
        height = tiffValues(b, at, little)[0];
      } else if (tag == TIFF_STRIP_OFFSETS || tag == TIFF_TILE_OFFSETS) {
        offsets = tiffValues(b, at, little);
      } else if (tag == TIFF_STRIP_BYTES || tag == TIFF_TILE_BYTES) {
        counts = tiffValues(b, at, little);
      }
    }
    if (offsets == null || counts == null || offsets.length != counts.length) {
      throw new RejectedImageException(RejectReason.CORRUPT, "TIFF has no image data pointers");
    }
    for (int i = 0; i < offsets.length; i++) {
      if (offsets[i] + counts[i] > b.length) {
        throw new RejectedImageException(
            RejectReason.TRUNCATED,
            "TIFF image data ends at byte " + (offsets[i] + counts[i]) + " of " + b.length);
      }
    }
    return new ImageHeader(
        Format.TIFF,
        (int) Math.min(width, Integer.MAX_VALUE),
        (int) Math.min(height, Integer.MAX_VALUE));
  }

  /** The SHORT or LONG values of the IFD entry at {@code at}: inline, or at an offset. */
  private static long[] tiffValues(byte[] b, int at, boolean little) throws RejectedImageException {
    int type = u16(b, at + 2, little);
    long count = u32(b, at + 4, little);
    int size = type == 3 ? 2 : type == 4 ? 4 : 0;
    if (size == 0 || count < 1 || count > 1 << 20) {
      throw new RejectedImageException(
          RejectReason.CORRUPT, "TIFF tag " + u16(b, at, little) + " has type " + type);
    }
    long start = size * count <= 4 ? at + 8 : u32(b, at + 8, little);
    if (start + size * count > b.length) {
      throw new RejectedImageException(RejectReason.TRUNCATED, "TIFF tag values lie past the end");
    }
    long[] values = new long[(int) count];
    for (int i = 0; i < count; i++) {
      int p = (int) (start + (long) size * i);
      values[i] = size == 2 ? u16(b, p, little) : u32(b, p, little);
    }
    return values;
  }

  private static int u16(byte[] b, int i, boolean little) {
    return little ? u16le(b, i) : u16be(b, i);
  }

  private static long u32(byte[] b, int i, boolean little) {
    return little ? u32le(b, i) : u32be(b, i);
  }

  private static int u24le(byte[] b, int i) {
    return u16le(b, i) | ((b[i + 2] & 0xFF) << 16);
  }

  private static boolean startsWith(byte[] b, int... prefix) {
    return hasAt(b, 0, prefix);
  }

  private static boolean hasAt(byte[] b, int at, int... prefix) {
    if (at < 0 || b.length < at + prefix.length) {
      return false;
    }
    for (int i = 0; i < prefix.length; i++) {
      if ((b[at + i] & 0xFF) != (prefix[i] & 0xFF)) {
        return false;
      }
    }
    return true;
  }

  private static int u16be(byte[] b, int i) {
    return ((b[i] & 0xFF) << 8) | (b[i + 1] & 0xFF);
  }

  private static int u16le(byte[] b, int i) {
    return (b[i] & 0xFF) | ((b[i + 1] & 0xFF) << 8);
  }

  private static long u32be(byte[] b, int i) {
    return ((long) u16be(b, i) << 16) | u16be(b, i + 2);
  }

  private static long u32le(byte[] b, int i) {
    return u16le(b, i) | ((long) u16le(b, i + 2) << 16);
  }
}
