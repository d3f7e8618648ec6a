package dev.ramtrain.etl.image;

/**
 * Format and pixel size read from an encoded image's header, before any decoding: enough to reject
 * decompression bombs cheaply, to pick a reduced-size JPEG decode, and to notice truncated files
 * that decoders would silently pad with grey.
 */
public record ImageHeader(Format format, int width, int height) {

  public enum Format {
    JPEG,
    PNG,
    BMP,
    GIF
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
    } else if (startsWith(b, 'R', 'I', 'F', 'F')
        || startsWith(b, 'I', 'I', 42, 0)
        || startsWith(b, 'M', 'M', 0, 42)) {
      throw new RejectedImageException(
          RejectReason.UNSUPPORTED_FORMAT, "WebP/TIFF images are not supported");
    } else {
      throw new RejectedImageException(
          RejectReason.NOT_AN_IMAGE, "not a JPEG, PNG, BMP or GIF file");
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
        return new ImageHeader(Format.JPEG, u16be(b, i + 7), u16be(b, i + 5));
      }
      if (marker == 0xDA || length < 2) {
        break; // scan data before any frame header
      }
      i += 2 + length;
    }
    throw new RejectedImageException(RejectReason.CORRUPT, "JPEG has no frame header");
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
