package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.ROTATE_180;
import static org.bytedeco.opencv.global.opencv_core.ROTATE_90_CLOCKWISE;
import static org.bytedeco.opencv.global.opencv_core.ROTATE_90_COUNTERCLOCKWISE;
import static org.bytedeco.opencv.global.opencv_core.flip;
import static org.bytedeco.opencv.global.opencv_core.rotate;
import static org.bytedeco.opencv.global.opencv_core.transpose;

import org.bytedeco.opencv.opencv_core.Mat;

/**
 * The EXIF orientation of a photo (TIFF tag 0x0112, 1 to 8): how the stored pixels must be turned
 * to stand upright, as {@code PIL.ImageOps.exif_transpose} turns them. Phones store a portrait
 * photo sideways and say so here; read from a JPEG's APP1 "Exif" segment. Anything malformed in
 * that segment reads as 1 (as stored): the pixels, not the metadata, are what must be whole.
 */
public final class ExifOrientation {
  public static final int UPRIGHT = 1;

  private ExifOrientation() {}

  /** Whether orientation {@code o} turns the image a quarter (width and height swap). */
  public static boolean swapsSides(int o) {
    return o >= 5 && o <= 8;
  }

  /**
   * The orientation an APP1 segment's payload records ({@code b[from, to)}, after its length): 1
   * unless it is an Exif block whose first IFD holds a valid orientation tag.
   */
  static int fromApp1(byte[] b, int from, int to) {
    int tiff = from + 6;
    if (to - from < 6 + 8
        || b[from] != 'E'
        || b[from + 1] != 'x'
        || b[from + 2] != 'i'
        || b[from + 3] != 'f'
        || b[from + 4] != 0
        || b[from + 5] != 0) {
      return UPRIGHT;
    }
    boolean little;
    if (b[tiff] == 'I' && b[tiff + 1] == 'I') {
      little = true;
    } else if (b[tiff] == 'M' && b[tiff + 1] == 'M') {
      little = false;
    } else {
      return UPRIGHT;
    }
    if (u16(b, tiff + 2, little) != 42) {
      return UPRIGHT;
    }
    long ifd = tiff + u32(b, tiff + 4, little);
    if (ifd < tiff + 8 || ifd + 2 > to) {
      return UPRIGHT;
    }
    int entries = u16(b, (int) ifd, little);
    for (int e = 0; e < entries; e++) {
      long at = ifd + 2 + 12L * e;
      if (at + 12 > to) {
        return UPRIGHT;
      }
      int tag = u16(b, (int) at, little);
      if (tag == 0x0112) {
        int type = u16(b, (int) at + 2, little);
        long count = u32(b, (int) at + 4, little);
        int value = u16(b, (int) at + 8, little);
        return type == 3 && count == 1 && value >= 1 && value <= 8 ? value : UPRIGHT;
      }
    }
    return UPRIGHT;
  }

  /** {@code stored} turned upright for orientation {@code o}: a new image (1: a copy). */
  public static Mat apply(Mat stored, int o) {
    Mat out = new Mat();
    switch (o) {
      case 2 -> flip(stored, out, 1); // mirrored left to right
      case 3 -> rotate(stored, out, ROTATE_180);
      case 4 -> flip(stored, out, 0); // mirrored top to bottom
      case 5 -> transpose(stored, out); // mirrored along the main diagonal
      case 6 -> rotate(stored, out, ROTATE_90_CLOCKWISE);
      case 7 -> { // mirrored along the other diagonal
        try (Mat t = new Mat()) {
          transpose(stored, t);
          flip(t, out, -1);
        }
      }
      case 8 -> rotate(stored, out, ROTATE_90_COUNTERCLOCKWISE);
      default -> stored.copyTo(out);
    }
    return out;
  }

  private static int u16(byte[] b, int at, boolean little) {
    return little
        ? (b[at] & 0xFF) | (b[at + 1] & 0xFF) << 8
        : (b[at] & 0xFF) << 8 | (b[at + 1] & 0xFF);
  }

  private static long u32(byte[] b, int at, boolean little) {
    return little
        ? (u16(b, at, true) & 0xFFFFL) | (long) u16(b, at + 2, true) << 16
        : (long) u16(b, at, false) << 16 | (u16(b, at + 2, false) & 0xFFFFL);
  }
}
