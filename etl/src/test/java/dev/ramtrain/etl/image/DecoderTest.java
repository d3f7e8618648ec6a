package dev.ramtrain.etl.image;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.format.ImageShape;
import java.awt.Color;
import java.awt.image.BufferedImage;
import java.awt.image.IndexColorModel;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.util.MemoryUtil;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Both decoders through the processor: the RGB bytes a shard would receive. */
class DecoderTest {

  /** The plain copy (stretch, no augmentation) of {@code bytes}, as HWC bytes. */
  static byte[] process(byte[] bytes, ImageDecoder.Kind kind, ImageShape shape) throws Exception {
    var processor =
        new ImageProcessor(
            new ImageTransform(shape, ResizeMode.STRETCH, Augmentation.NONE), kind, 1L << 30, 1);
    List<byte[]> out = new ArrayList<>();
    processor.process(
        RawSample.encoded("k", bytes, 0, null),
        1,
        (copy, address) -> {
          byte[] pixels = new byte[shape.bytes()];
          MemoryUtil.copyFromMemory(address, pixels, 0, pixels.length);
          out.add(pixels);
        });
    assertEquals(1, out.size());
    return out.get(0);
  }

  private static byte[] rgbBytes(BufferedImage image) {
    byte[] out = new byte[image.getWidth() * image.getHeight() * 3];
    int i = 0;
    for (int y = 0; y < image.getHeight(); y++) {
      for (int x = 0; x < image.getWidth(); x++) {
        int p = image.getRGB(x, y);
        out[i++] = (byte) (p >> 16);
        out[i++] = (byte) (p >> 8);
        out[i++] = (byte) p;
      }
    }
    return out;
  }

  private static double meanAbsDiff(byte[] a, byte[] b) {
    long sum = 0;
    for (int i = 0; i < a.length; i++) {
      sum += Math.abs((a[i] & 0xFF) - (b[i] & 0xFF));
    }
    return (double) sum / a.length;
  }

  @ParameterizedTest
  @EnumSource(ImageDecoder.Kind.class)
  void losslessPngComesBackExactlyAsRgb(ImageDecoder.Kind kind) throws Exception {
    Random random = new Random(3);
    BufferedImage image = Encoded.rgb(24, 16, (x, y) -> random.nextInt(1 << 24));
    assertArrayEquals(
        rgbBytes(image), process(Encoded.encode(image, "png"), kind, new ImageShape(16, 24, 3)));
  }

  @Test
  void decodersAgreeOnJpeg() throws Exception {
    byte[] jpeg =
        Encoded.encode(Encoded.rgb(64, 48, (x, y) -> (x * 4) << 16 | (y * 5) << 8 | 90), "jpeg");
    ImageShape shape = new ImageShape(48, 64, 3);
    double diff =
        meanAbsDiff(
            process(jpeg, ImageDecoder.Kind.OPENCV, shape),
            process(jpeg, ImageDecoder.Kind.IMAGEIO, shape));
    assertTrue(diff < 1.5, "mean abs diff " + diff);
  }

  @ParameterizedTest
  @EnumSource(ImageDecoder.Kind.class)
  void greyPaletteSixteenBitAndAlphaPngsAreConvertedNotRejected(ImageDecoder.Kind kind)
      throws Exception {
    ImageShape shape = new ImageShape(8, 8, 3);
    BufferedImage grey = new BufferedImage(8, 8, BufferedImage.TYPE_BYTE_GRAY);
    grey.getRaster().setSamples(0, 0, 8, 8, 0, filled(64, 100));
    assertAll(process(Encoded.encode(grey, "png"), kind, shape), 100, 100, 100, 0);

    BufferedImage sixteen = new BufferedImage(8, 8, BufferedImage.TYPE_USHORT_GRAY);
    sixteen.getRaster().setSamples(0, 0, 8, 8, 0, filled(64, 0x8080));
    assertAll(process(Encoded.encode(sixteen, "png"), kind, shape), 128, 128, 128, 1);

    IndexColorModel palette =
        new IndexColorModel(
            2, 2, new byte[] {(byte) 250, 0}, new byte[] {10, 0}, new byte[] {20, (byte) 255});
    BufferedImage indexed = new BufferedImage(8, 8, BufferedImage.TYPE_BYTE_INDEXED, palette);
    assertAll(process(Encoded.encode(indexed, "png"), kind, shape), 250, 10, 20, 0);

    BufferedImage alpha = new BufferedImage(8, 8, BufferedImage.TYPE_INT_ARGB);
    for (int y = 0; y < 8; y++) {
      for (int x = 0; x < 8; x++) {
        alpha.setRGB(x, y, new Color(10, 200, 30, 128).getRGB());
      }
    }
    assertAll(process(Encoded.encode(alpha, "png"), kind, shape), 10, 200, 30, 0);
  }

  @Test
  void gifGoesThroughEvenWithTheOpenCvDecoder() throws Exception {
    IndexColorModel palette =
        new IndexColorModel(
            2, 2, new byte[] {(byte) 200, 0}, new byte[] {40, 0}, new byte[] {0, 0});
    BufferedImage gif = new BufferedImage(8, 8, BufferedImage.TYPE_BYTE_INDEXED, palette);
    assertAll(
        process(Encoded.encode(gif, "gif"), ImageDecoder.Kind.OPENCV, new ImageShape(8, 8, 3)),
        200,
        40,
        0,
        0);
  }

  @ParameterizedTest
  @EnumSource(ImageDecoder.Kind.class)
  void cmykJpegIsConvertedToRgb(ImageDecoder.Kind kind) throws Exception {
    byte[] cmyk;
    try (InputStream in = getClass().getResourceAsStream("/images/cmyk.jpg")) {
      cmyk = in.readAllBytes();
    }
    byte[] rgb = process(cmyk, kind, new ImageShape(16, 32, 3));
    int left = (8 * 32 + 4) * 3; // row 8, column 4: red half
    int right = (8 * 32 + 28) * 3; // row 8, column 28: blue half
    assertTrue(
        (rgb[left] & 0xFF) > 200 && (rgb[left + 1] & 0xFF) < 60 && (rgb[left + 2] & 0xFF) < 60,
        "red");
    assertTrue(
        (rgb[right] & 0xFF) < 60 && (rgb[right + 1] & 0xFF) < 60 && (rgb[right + 2] & 0xFF) > 200,
        "blue");
  }

  @Test
  void largeJpegIsDecodedAtReducedSizeWithNearlyTheSameResult() throws Exception {
    BufferedImage big =
        Encoded.rgb(480, 320, (x, y) -> (x / 2) << 16 | (y * 3 / 4) << 8 | ((x + y) / 4));
    byte[] jpeg = Encoded.encode(big, "jpeg");
    ImageShape shape = new ImageShape(32, 32, 3);
    var processor =
        new ImageProcessor(
            new ImageTransform(shape, ResizeMode.STRETCH, Augmentation.NONE),
            ImageDecoder.Kind.OPENCV,
            1L << 30,
            1);
    assertEquals(8, processor.reduceFactor(ImageHeader.probe(jpeg, 1L << 30)));
    var full =
        new ImageProcessor(
            new ImageTransform(new ImageShape(160, 160, 3), ResizeMode.STRETCH, Augmentation.NONE),
            ImageDecoder.Kind.OPENCV,
            1L << 30,
            1);
    assertEquals(
        2,
        full.reduceFactor(ImageHeader.probe(jpeg, 1L << 30)),
        "160 px needs at least half of 320");
    double diff =
        meanAbsDiff(
            process(jpeg, ImageDecoder.Kind.OPENCV, shape),
            process(jpeg, ImageDecoder.Kind.IMAGEIO, shape));
    assertTrue(diff < 3, "reduced decode vs full decode + area resize: mean abs diff " + diff);
  }

  private static int[] filled(int n, int value) {
    int[] a = new int[n];
    java.util.Arrays.fill(a, value);
    return a;
  }

  private static void assertAll(byte[] rgb, int r, int g, int b, int tolerance) {
    for (int i = 0; i < rgb.length; i += 3) {
      assertTrue(
          Math.abs((rgb[i] & 0xFF) - r) <= tolerance
              && Math.abs((rgb[i + 1] & 0xFF) - g) <= tolerance
              && Math.abs((rgb[i + 2] & 0xFF) - b) <= tolerance,
          "pixel "
              + i / 3
              + " is "
              + (rgb[i] & 0xFF)
              + ","
              + (rgb[i + 1] & 0xFF)
              + ","
              + (rgb[i + 2] & 0xFF)
              + " expected "
              + r
              + ","
              + g
              + ","
              + b);
    }
  }
}
