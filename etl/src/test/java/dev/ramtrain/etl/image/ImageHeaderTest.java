package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_WEBP_QUALITY;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.source.RejectReason;
import dev.ramtrain.etl.source.RejectedImageException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.javacpp.indexer.UByteIndexer;
import org.bytedeco.opencv.opencv_core.Mat;
import org.junit.jupiter.api.Test;

class ImageHeaderTest {
  private static final long LIMIT = 89_478_485;

  private static RejectReason reason(byte[] bytes) {
    return assertThrows(RejectedImageException.class, () -> ImageHeader.probe(bytes, LIMIT))
        .reason();
  }

  @Test
  void readsSizeOfEveryFormatWithoutDecoding() throws Exception {
    var image = Encoded.rgb(37, 23, (x, y) -> x * 1000 + y);
    for (String format : new String[] {"jpeg", "png", "bmp", "gif", "tiff"}) {
      ImageHeader h = ImageHeader.probe(Encoded.encode(image, format), LIMIT);
      assertEquals(37, h.width(), format);
      assertEquals(23, h.height(), format);
      assertEquals(format.equals("jpeg") ? "JPEG" : format.toUpperCase(), h.format().name());
    }
  }

  @Test
  void badInputsGetTheirReason() {
    byte[] jpeg = Encoded.encode(Encoded.rgb(40, 30, (x, y) -> x * y), "jpeg");
    byte[] png = Encoded.encode(Encoded.rgb(40, 30, (x, y) -> x * y), "png");
    assertEquals(RejectReason.EMPTY_FILE, reason(new byte[0]));
    assertEquals(
        RejectReason.NOT_AN_IMAGE,
        reason("hello, I am a text file".getBytes(StandardCharsets.UTF_8)));
    assertEquals(RejectReason.TRUNCATED, reason(Arrays.copyOf(jpeg, jpeg.length / 2)));
    assertEquals(RejectReason.TRUNCATED, reason(Arrays.copyOf(png, png.length - 20)));
    assertEquals(
        RejectReason.TRUNCATED, reason("RIFF\0\0\0\0WEBPVP8 ".getBytes(StandardCharsets.US_ASCII)));
    // SOI, a comment segment, EOI: a JPEG with no frame header.
    assertEquals(
        RejectReason.CORRUPT,
        reason(
            new byte[] {
              (byte) 0xFF,
              (byte) 0xD8,
              (byte) 0xFF,
              (byte) 0xFE,
              0,
              4,
              'h',
              'i',
              0,
              0,
              0,
              0,
              (byte) 0xFF,
              (byte) 0xD9
            }));
  }

  @Test
  void decompressionBombIsRejectedFromItsHeader() {
    // A PNG whose IHDR claims 100000 x 100000 pixels; no pixel data is ever decoded.
    ByteBuffer b = ByteBuffer.allocate(57);
    b.put(new byte[] {(byte) 0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A});
    b.putInt(13).put("IHDR".getBytes(StandardCharsets.US_ASCII)).putInt(100_000).putInt(100_000);
    b.put(new byte[] {8, 2, 0, 0, 0}).putInt(0);
    b.putInt(0).put("IDAT".getBytes(StandardCharsets.US_ASCII)).putInt(0);
    b.putInt(0).put("IEND".getBytes(StandardCharsets.US_ASCII)).putInt(0);
    var e = assertThrows(RejectedImageException.class, () -> ImageHeader.probe(b.array(), LIMIT));
    assertEquals(RejectReason.TOO_LARGE, e.reason());
  }

  /** SOI, a progressive frame header (SOF2) of 40x30, {@code scans} scans, EOI. */
  private static byte[] progressive(int scans) {
    ByteBuffer b = ByteBuffer.allocate(4 + 19 + 11 * scans + 2);
    b.put(new byte[] {(byte) 0xFF, (byte) 0xD8});
    b.put(new byte[] {(byte) 0xFF, (byte) 0xC2}).putShort((short) 17).put((byte) 8);
    b.putShort((short) 30).putShort((short) 40).put((byte) 3);
    b.put(new byte[] {1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1});
    for (int i = 0; i < scans; i++) {
      b.put(new byte[] {(byte) 0xFF, (byte) 0xDA}).putShort((short) 8);
      b.put(new byte[] {1, 1, 0, 0, 0, 0, 0x55}); // one component, then a byte of scan data
    }
    b.put(new byte[] {(byte) 0xFF, (byte) 0xD9});
    return Arrays.copyOf(b.array(), b.position());
  }

  /**
   * A progressive JPEG's scans each decode the whole image again: more than {@link
   * ImageHeader#MAX_SCANS} are refused from the markers, before decoding (5,000 took 140 s).
   */
  @Test
  void aProgressiveJpegOfManyScansIsRefusedBeforeDecoding() throws Exception {
    assertEquals(40, ImageHeader.probe(progressive(10), LIMIT).width());
    assertEquals(40, ImageHeader.probe(progressive(ImageHeader.MAX_SCANS), LIMIT).width());
    RejectedImageException e =
        assertThrows(
            RejectedImageException.class, () -> ImageHeader.probe(progressive(5000), LIMIT));
    assertEquals(RejectReason.CORRUPT, e.reason());
    assertTrue(e.getMessage().contains("more than " + ImageHeader.MAX_SCANS + " scans"));
  }

  @Test
  void webpAndTiffAreReadCheckedAndDecoded() throws Exception {
    byte[] lossy = Encoded.openCv(".webp", 3, IMWRITE_WEBP_QUALITY, 80);
    byte[] lossless = Encoded.openCv(".webp", 3, IMWRITE_WEBP_QUALITY, 101);
    byte[] alpha = Encoded.openCv(".webp", 4, IMWRITE_WEBP_QUALITY, 80);
    byte[] tiff = Encoded.openCv(".tiff", 3);
    String[] chunks = {"VP8 ", "VP8L", "VP8X"};
    byte[][] webps = {lossy, lossless, alpha};
    for (int i = 0; i < webps.length; i++) {
      assertEquals(chunks[i], new String(webps[i], 12, 4, StandardCharsets.US_ASCII));
      ImageHeader h = ImageHeader.probe(webps[i], LIMIT);
      assertEquals(
          List.of(ImageHeader.Format.WEBP, 37, 23),
          List.of(h.format(), h.width(), h.height()),
          chunks[i]);
      assertEquals(RejectReason.TRUNCATED, reason(Arrays.copyOf(webps[i], webps[i].length - 9)));
    }
    assertEquals('I', tiff[0]);
    ImageHeader t = ImageHeader.probe(tiff, LIMIT);
    assertEquals(
        List.of(ImageHeader.Format.TIFF, 37, 23), List.of(t.format(), t.width(), t.height()));
    assertEquals(RejectReason.TRUNCATED, reason(Arrays.copyOf(tiff, tiff.length / 2)));
    // Lossless WebP and TIFF decode to the exact pixels, as RGB.
    for (byte[] exact : new byte[][] {lossless, tiff}) {
      try (Mat rgb = new OpenCvDecoder(null).decode(exact, ImageHeader.probe(exact, LIMIT), 3, 1)) {
        UByteIndexer px = rgb.createIndexer();
        assertEquals((10 * 7 + 5 * 11 + 2 * 60) & 0xFF, px.get(5, 10, 0), "R is the card's third");
        assertEquals((10 * 7 + 5 * 11) & 0xFF, px.get(5, 10, 2), "B is the card's first");
      }
    }
  }

  @Test
  void aWebpBombIsRejectedFromItsHeader() {
    // VP8X claiming a 20000 x 20000 canvas, and nothing else.
    ByteBuffer b = ByteBuffer.allocate(30).order(ByteOrder.LITTLE_ENDIAN);
    b.put("RIFF".getBytes(StandardCharsets.US_ASCII)).putInt(22);
    b.put("WEBPVP8X".getBytes(StandardCharsets.US_ASCII)).putInt(10).putInt(0);
    b.put((byte) 0x1F)
        .put((byte) 0x4E)
        .put((byte) 0)
        .put((byte) 0x1F)
        .put((byte) 0x4E)
        .put((byte) 0);
    var e = assertThrows(RejectedImageException.class, () -> ImageHeader.probe(b.array(), LIMIT));
    assertEquals(RejectReason.TOO_LARGE, e.reason());
  }
}
