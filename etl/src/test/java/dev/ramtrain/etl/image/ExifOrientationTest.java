package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC1;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.format.ImageShape;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.memory.util.MemoryUtil;
import org.bytedeco.javacpp.indexer.UByteIndexer;
import org.bytedeco.opencv.opencv_core.Mat;
import org.junit.jupiter.api.Test;

/**
 * Photos turned upright by their EXIF orientation as PIL's {@code exif_transpose} turns them: the
 * tag read from a JPEG's APP1 segment in either byte order, each of the eight orientations checked
 * against the EXIF definition pixel by pixel, and a sideways JPEG preprocessed as the same photo
 * stored upright.
 */
class ExifOrientationTest {
  private static final int W = 5;
  private static final int H = 3;

  /**
   * Where upright pixel (x, y) comes from in the stored W x H image, per the EXIF definition (PIL:
   * 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE, 8
   * ROTATE_90, its rotations counter-clockwise).
   */
  private static int[] source(int o, int x, int y) {
    return switch (o) {
      case 2 -> new int[] {W - 1 - x, y};
      case 3 -> new int[] {W - 1 - x, H - 1 - y};
      case 4 -> new int[] {x, H - 1 - y};
      case 5 -> new int[] {y, x};
      case 6 -> new int[] {y, H - 1 - x};
      case 7 -> new int[] {W - 1 - y, H - 1 - x};
      case 8 -> new int[] {W - 1 - y, x};
      default -> new int[] {x, y};
    };
  }

  @Test
  void everyOrientationTurnsThePixelsAsExifDefinesIt() {
    try (Mat stored = new Mat(H, W, CV_8UC1)) {
      UByteIndexer in = stored.createIndexer();
      for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
          in.put(y, x, 10 * y + x);
        }
      }
      for (int o = 1; o <= 8; o++) {
        try (Mat up = ExifOrientation.apply(stored, o)) {
          boolean swap = ExifOrientation.swapsSides(o);
          assertEquals(swap ? H : W, up.cols(), "orientation " + o);
          assertEquals(swap ? W : H, up.rows(), "orientation " + o);
          UByteIndexer out = up.createIndexer();
          for (int y = 0; y < up.rows(); y++) {
            for (int x = 0; x < up.cols(); x++) {
              int[] s = source(o, x, y);
              assertEquals(
                  10 * s[1] + s[0], out.get(y, x), "orientation " + o + " at " + x + "," + y);
            }
          }
        }
      }
    }
  }

  /** {@code jpeg} with an APP1 Exif segment recording orientation {@code o} after its SOI. */
  static byte[] withOrientation(byte[] jpeg, int o, boolean littleEndian) {
    ByteArrayOutputStream tiff = new ByteArrayOutputStream();
    int[] header =
        littleEndian
            ? new int[] {'I', 'I', 42, 0, 8, 0, 0, 0}
            : new int[] {'M', 'M', 0, 42, 0, 0, 0, 8};
    for (int b : header) {
      tiff.write(b);
    }
    // IFD0: two entries, an unrelated one (ImageWidth) and the orientation, SHORT, count 1.
    int[][] entries = {{0x0100, 3, 1, 640}, {0x0112, 3, 1, o}};
    writeShort(tiff, entries.length, littleEndian);
    for (int[] e : entries) {
      writeShort(tiff, e[0], littleEndian);
      writeShort(tiff, e[1], littleEndian);
      writeInt(tiff, e[2], littleEndian);
      writeShort(tiff, e[3], littleEndian);
      writeShort(tiff, 0, littleEndian);
    }
    writeInt(tiff, 0, littleEndian); // no next IFD
    byte[] payload = tiff.toByteArray();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(0xFF);
    out.write(0xD8);
    out.write(0xFF);
    out.write(0xE1);
    int length = 2 + 6 + payload.length;
    out.write(length >> 8);
    out.write(length & 0xFF);
    out.writeBytes("Exif\0\0".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1));
    out.writeBytes(payload);
    out.write(jpeg, 2, jpeg.length - 2);
    return out.toByteArray();
  }

  private static void writeShort(ByteArrayOutputStream out, int v, boolean little) {
    out.write(little ? v & 0xFF : v >> 8 & 0xFF);
    out.write(little ? v >> 8 & 0xFF : v & 0xFF);
  }

  private static void writeInt(ByteArrayOutputStream out, int v, boolean little) {
    if (little) {
      writeShort(out, v & 0xFFFF, true);
      writeShort(out, v >>> 16, true);
    } else {
      writeShort(out, v >>> 16, false);
      writeShort(out, v & 0xFFFF, false);
    }
  }

  @Test
  void theHeaderReadsTheTagInEitherByteOrderAndIgnoresWhatIsMalformed() throws Exception {
    byte[] jpeg = Encoded.openCv(".jpg", 3);
    for (boolean little : new boolean[] {true, false}) {
      for (int o = 1; o <= 8; o++) {
        ImageHeader h = ImageHeader.probe(withOrientation(jpeg, o, little), 1L << 30);
        assertEquals(o, h.orientation(), "orientation " + o + (little ? " II" : " MM"));
        assertEquals(ExifOrientation.swapsSides(o) ? 23 : 37, h.upright().width());
      }
    }
    assertEquals(1, ImageHeader.probe(jpeg, 1L << 30).orientation(), "no Exif: as stored");
    byte[] bad = withOrientation(jpeg, 9, true); // no such orientation
    assertEquals(1, ImageHeader.probe(bad, 1L << 30).orientation());
    byte[] cut = withOrientation(jpeg, 6, true);
    cut[15] = (byte) 0xFF; // IFD offset far past the segment
    assertEquals(1, ImageHeader.probe(cut, 1L << 30).orientation());
  }

  private static byte[] plain(ImageProcessor processor, RawSample sample, ImageShape shape)
      throws Exception {
    List<byte[]> out = new ArrayList<>();
    processor.process(
        sample,
        1,
        (copy, address) -> {
          byte[] pixels = new byte[shape.bytes()];
          MemoryUtil.copyFromMemory(address, pixels, 0, pixels.length);
          out.add(pixels);
        });
    return out.get(0);
  }

  /**
   * A JPEG stored sideways (orientation 6) is preprocessed as the upright photo: the pixels of its
   * decode turned a quarter clockwise, then resized as any image; with the setting off, the stored
   * pixels.
   */
  @Test
  void aSidewaysPhotoIsPreprocessedUpright() throws Exception {
    byte[] jpeg = Encoded.openCv(".jpg", 3); // 37 wide, 23 high
    byte[] sideways = withOrientation(jpeg, 6, false);
    ImageShape shape = new ImageShape(30, 18, 3); // upright: taller than wide
    var processor =
        new ImageProcessor(
            new ImageTransform(shape, ResizeMode.STRETCH, Augmentation.NONE),
            ImageDecoder.Kind.OPENCV,
            1L << 30,
            1);
    byte[] upright;
    try (Mat stored =
            ImageDecoder.Kind.OPENCV
                .create()
                .decode(jpeg, ImageHeader.probe(jpeg, 1L << 30), 3, 1);
        Mat turned = ExifOrientation.apply(stored, 6)) {
      byte[] pixels = new byte[turned.rows() * turned.cols() * 3];
      turned.data().get(pixels);
      upright =
          plain(
              processor,
              RawSample.pixels("k", pixels, 0, turned.cols(), turned.rows(), 3, null),
              shape);
    }
    assertArrayEquals(upright, plain(processor, RawSample.encoded("k", sideways, 0, null), shape));
    assertNotEquals(
        java.util.Arrays.toString(upright),
        java.util.Arrays.toString(
            plain(
                processor.withExifOrientation(false),
                RawSample.encoded("k", sideways, 0, null),
                shape)),
        "ignored, the stored pixels");
  }
}
