package dev.ramtrain.etl.image;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.format.ImageShape;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.arrow.memory.util.MemoryUtil;
import org.junit.jupiter.api.Test;

class ImageTransformTest {
  private static final int RED = 0xFF0000;
  private static final int GREEN = 0x00FF00;
  private static final int BLUE = 0x0000FF;

  /** 200x100 raw RGB: red left quarter, green middle half, blue right quarter. */
  private static RawSample bands() {
    byte[] hwc = new byte[200 * 100 * 3];
    for (int y = 0; y < 100; y++) {
      for (int x = 0; x < 200; x++) {
        int c = x < 50 ? RED : x < 150 ? GREEN : BLUE;
        int i = (y * 200 + x) * 3;
        hwc[i] = (byte) (c >> 16);
        hwc[i + 1] = (byte) (c >> 8);
        hwc[i + 2] = (byte) c;
      }
    }
    return RawSample.pixels("bands", hwc, 0, 200, 100, 3, null);
  }

  static List<byte[]> outputs(RawSample sample, ImageTransform transform, long seed, long id)
      throws Exception {
    return outputs(
        sample, new ImageProcessor(transform, ImageDecoder.Kind.OPENCV, 1L << 30, seed), id);
  }

  static List<byte[]> outputs(RawSample sample, ImageProcessor processor, long id)
      throws Exception {
    List<byte[]> out = new ArrayList<>();
    processor.process(
        sample,
        id,
        (copy, address) -> {
          byte[] pixels = new byte[processor.shape().bytes()];
          MemoryUtil.copyFromMemory(address, pixels, 0, pixels.length);
          out.add(pixels);
        });
    return out;
  }

  private static int pixel(byte[] hwc, int width, int x, int y) {
    int i = (y * width + x) * 3;
    return (hwc[i] & 0xFF) << 16 | (hwc[i + 1] & 0xFF) << 8 | (hwc[i + 2] & 0xFF);
  }

  @Test
  void shorterSideCropKeepsTheCentre() throws Exception {
    byte[] out =
        outputs(
                bands(),
                new ImageTransform(
                    new ImageShape(32, 32, 3), ResizeMode.SHORTER_SIDE_CROP, Augmentation.NONE),
                1,
                1)
            .get(0);
    for (int y = 0; y < 32; y++) {
      for (int x = 0; x < 32; x++) {
        assertEquals(GREEN, pixel(out, 32, x, y), "(" + x + "," + y + ")");
      }
    }
  }

  @Test
  void stretchKeepsEveryBandInProportion() throws Exception {
    byte[] out =
        outputs(
                bands(),
                new ImageTransform(
                    new ImageShape(10, 40, 3), ResizeMode.STRETCH, Augmentation.NONE),
                1,
                1)
            .get(0);
    assertEquals(RED, pixel(out, 40, 4, 5));
    assertEquals(GREEN, pixel(out, 40, 20, 5));
    assertEquals(BLUE, pixel(out, 40, 35, 5));
  }

  @Test
  void letterboxPadsWithBlackBars() throws Exception {
    byte[] out =
        outputs(
                bands(),
                new ImageTransform(
                    new ImageShape(32, 32, 3), ResizeMode.LETTERBOX, Augmentation.NONE),
                1,
                1)
            .get(0);
    // 200x100 fits as 32x16, centred: rows 0..7 and 24..31 are padding.
    assertEquals(0, pixel(out, 32, 16, 3));
    assertEquals(0, pixel(out, 32, 16, 28));
    assertEquals(GREEN, pixel(out, 32, 16, 16));
    assertEquals(RED, pixel(out, 32, 2, 16));
  }

  @Test
  void augmentedCopiesAreDeterministicPerSeedIdAndCopy() throws Exception {
    Augmentation aug = new Augmentation(3, true, 0.2, 1.0, 0.75, 1.33, 0.5, 15, 0.3, 0.3, 0.3);
    ImageTransform t =
        new ImageTransform(new ImageShape(24, 24, 3), ResizeMode.SHORTER_SIDE_CROP, aug);
    List<byte[]> a = outputs(bands(), t, 7, 99);
    List<byte[]> b = outputs(bands(), t, 7, 99);
    assertEquals(4, a.size(), "original + 3 copies");
    for (int i = 0; i < a.size(); i++) {
      assertArrayEquals(a.get(i), b.get(i), "copy " + i + " is reproducible");
    }
    assertFalse(Arrays.equals(a.get(1), a.get(2)), "copies differ from each other");
    assertFalse(
        Arrays.equals(a.get(1), outputs(bands(), t, 8, 99).get(1)), "another seed, another copy");
    assertFalse(
        Arrays.equals(a.get(1), outputs(bands(), t, 7, 100).get(1)),
        "another sample id, another copy");
  }

  @Test
  void fullCropWithCertainFlipMirrorsThePlainImage() throws Exception {
    // Scale 1 and an aspect range containing 2:1 make the crop the whole image.
    Augmentation flipOnly = new Augmentation(1, true, 1.0, 1.0, 0.5, 2.5, 1.0, 0, 0, 0, 0);
    ImageTransform t = new ImageTransform(new ImageShape(10, 40, 3), ResizeMode.STRETCH, flipOnly);
    List<byte[]> out = outputs(bands(), t, 1, 1);
    byte[] plain = out.get(0);
    byte[] flipped = out.get(1);
    for (int y = 0; y < 10; y++) {
      for (int x = 0; x < 40; x++) {
        assertEquals(
            pixel(plain, 40, 39 - x, y), pixel(flipped, 40, x, y), "(" + x + "," + y + ")");
      }
    }
  }

  @Test
  void greyOutputFromRgbUsesLuma() throws Exception {
    ImageTransform t =
        new ImageTransform(new ImageShape(10, 40, 1), ResizeMode.STRETCH, Augmentation.NONE);
    byte[] out = outputs(bands(), t, 1, 1).get(0);
    assertEquals(76, out[5 * 40 + 4] & 0xFF, "red: 0.299 * 255");
    assertEquals(150, out[5 * 40 + 20] & 0xFF, "green: 0.587 * 255");
    assertEquals(29, out[5 * 40 + 35] & 0xFF, "blue: 0.114 * 255");
  }
}
