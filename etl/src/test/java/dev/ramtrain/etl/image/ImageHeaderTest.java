package dev.ramtrain.etl.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
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
    for (String format : new String[] {"jpeg", "png", "bmp", "gif"}) {
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
        RejectReason.UNSUPPORTED_FORMAT,
        reason("RIFF\0\0\0\0WEBPVP8 ".getBytes(StandardCharsets.US_ASCII)));
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
}
