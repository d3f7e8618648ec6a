package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_PROGRESSIVE;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_QUALITY;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.BytePointer;
import org.junit.jupiter.api.Test;

/** What an encoded shard stores per image: the source kept, a fresh JPEG, or the pixels. */
class JpegRowsTest {
  private static final ImageShape SHAPE = new ImageShape(96, 128, 3);

  /** The pixels of {@code jpeg} as the loader decodes them. */
  private static byte[] decoded(byte[] jpeg, ImageShape shape) {
    byte[] out = new byte[shape.bytes()];
    try (BytePointer in = new BytePointer(jpeg);
        BytePointer target = new BytePointer(out.length)) {
      assertNull(
          JpegRowDecoder.decode(
              in.address(),
              jpeg.length,
              shape,
              1,
              new Region(0, 0, shape.width(), shape.height()),
              target.address()));
      target.get(out);
    }
    return out;
  }

  private static byte[] encode(JpegRows rows, byte[] pixels, byte[] source) throws Exception {
    try (BytePointer p = new BytePointer(pixels)) {
      return rows.encode(p.address(), source);
    }
  }

  @Test
  void aSequentialSourceOfTheStoredSizeIsKeptAsItCame() throws Exception {
    JpegRegionDecoderTest.assumeBuilt();
    byte[] source = JpegRegionDecoderTest.jpeg(128, 96, 3, IMWRITE_JPEG_QUALITY, 95);
    byte[] pixels = decoded(source, SHAPE);
    try (JpegRows rows = new JpegRows(new ImageStorage(ImageStorage.Mode.JPEG, 90), SHAPE)) {
      assertArrayEquals(source, encode(rows, pixels, source), "kept byte for byte");
      byte[] changed = pixels.clone();
      changed[77] ^= 1; // not what the source decodes to: re-encoded
      byte[] fresh = encode(rows, changed, source);
      assertFalse(Arrays.equals(source, fresh));
    }
  }

  @Test
  void aProgressiveSourceIsReEncoded() throws Exception {
    JpegRegionDecoderTest.assumeBuilt();
    byte[] source = JpegRegionDecoderTest.jpeg(128, 96, 3, IMWRITE_JPEG_PROGRESSIVE, 1);
    byte[] pixels = decoded(source, SHAPE);
    try (JpegRows rows = new JpegRows(new ImageStorage(ImageStorage.Mode.JPEG, 90), SHAPE)) {
      byte[] stored = encode(rows, pixels, source);
      assertFalse(Arrays.equals(source, stored));
      assertFalse(ImageHeader.probe(stored, 1 << 20).progressive());
    }
  }

  /**
   * A fresh JPEG decodes near the pixels it was made from: on this smooth image at quality 90 the
   * error is a few levels (JPEG's quantisation), far below what a channel swap or a shifted row
   * would give.
   */
  @Test
  void aFreshJpegDecodesCloseToItsPixelsInRgbOrder() throws Exception {
    JpegRegionDecoderTest.assumeBuilt();
    byte[] pixels = new byte[SHAPE.bytes()];
    for (int y = 0; y < SHAPE.height(); y++) {
      for (int x = 0; x < SHAPE.width(); x++) {
        int at = (y * SHAPE.width() + x) * 3;
        pixels[at] = (byte) (x * 2); // red rises left to right,
        pixels[at + 1] = (byte) (y * 2); // green top to bottom,
        pixels[at + 2] = (byte) 60; // blue stays
      }
    }
    try (JpegRows rows = new JpegRows(new ImageStorage(ImageStorage.Mode.JPEG, 90), SHAPE)) {
      byte[] jpeg = encode(rows, pixels, null);
      assertNotNull(jpeg);
      assertTrue(jpeg.length * 5 < pixels.length, jpeg.length + " bytes");
      byte[] back = decoded(jpeg, SHAPE);
      double error = 0;
      for (int i = 0; i < pixels.length; i++) {
        error += Math.abs((pixels[i] & 0xFF) - (back[i] & 0xFF));
      }
      assertTrue(error / pixels.length < 2.0, "mean error " + error / pixels.length);
    }
  }

  @Test
  void greyImagesAreStoredAsGreyJpegs() throws Exception {
    JpegRegionDecoderTest.assumeBuilt();
    ImageShape grey = new ImageShape(40, 56, 1);
    byte[] pixels = new byte[grey.bytes()];
    for (int i = 0; i < pixels.length; i++) {
      pixels[i] = (byte) (i % 56 * 4); // a ramp along each row
    }
    try (JpegRows rows = new JpegRows(new ImageStorage(ImageStorage.Mode.JPEG, 95), grey)) {
      byte[] jpeg = encode(rows, pixels, null);
      byte[] back = decoded(jpeg, grey);
      double error = 0;
      for (int i = 0; i < pixels.length; i++) {
        error += Math.abs((pixels[i] & 0xFF) - (back[i] & 0xFF));
      }
      assertTrue(error / pixels.length < 2.0, "mean error " + error / pixels.length);
    }
  }

  @Test
  void autoKeepsPixelsWhereAJpegWouldNotHalveThem() throws Exception {
    JpegRegionDecoderTest.assumeBuilt();
    ImageShape small = new ImageShape(16, 16, 3);
    byte[] noise = new byte[small.bytes()];
    new SplittableRandom(1).nextBytes(noise);
    byte[] flat = new byte[SHAPE.bytes()];
    Arrays.fill(flat, (byte) 90);
    ImageStorage auto = new ImageStorage(ImageStorage.Mode.AUTO, 90);
    try (JpegRows smallRows = new JpegRows(auto, small);
        JpegRows rows = new JpegRows(auto, SHAPE)) {
      assertNull(encode(smallRows, noise, null), "16x16 noise: pixels");
      byte[] jpeg = encode(rows, flat, null);
      assertNotNull(jpeg, "a flat 128x96 image: JPEG");
      assertEquals(90, decoded(jpeg, SHAPE)[5] & 0xFF);
    }
  }
}
