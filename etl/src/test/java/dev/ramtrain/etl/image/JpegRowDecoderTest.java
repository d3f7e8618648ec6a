package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_QUALITY;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_SAMPLING_FACTOR;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_SAMPLING_FACTOR_420;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_SAMPLING_FACTOR_444;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.format.ImageShape;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Rect;
import org.junit.jupiter.api.Test;

/**
 * A shard's JPEG row decoded where it lies: the region a crop needs at a DCT scale has exactly the
 * pixels of the whole image decoded at that scale and cropped; damage and a JPEG of another size
 * are reported, never decoded to grey.
 */
class JpegRowDecoderTest {
  private static final long PIXELS = 1L << 26;

  private static String decode(
      byte[] jpeg, ImageShape stored, int reduce, Region region, byte[] out) {
    try (BytePointer in = new BytePointer(jpeg);
        BytePointer target = new BytePointer(out.length)) {
      String why =
          JpegRowDecoder.decode(
              in.address(), jpeg.length, stored, reduce, region, target.address());
      target.get(out);
      return why;
    }
  }

  @Test
  void aRegionAtADctScaleIsTheWholeDecodeAtThatScaleCropped() throws Exception {
    JpegRegionDecoderTest.assumeBuilt();
    OpenCvDecoder whole = new OpenCvDecoder(new ImageIoDecoder());
    SplittableRandom rng = new SplittableRandom(11);
    for (int sampling :
        new int[] {IMWRITE_JPEG_SAMPLING_FACTOR_420, IMWRITE_JPEG_SAMPLING_FACTOR_444}) {
      byte[] jpeg =
          JpegRegionDecoderTest.jpeg(
              256, 192, 3, IMWRITE_JPEG_QUALITY, 90, IMWRITE_JPEG_SAMPLING_FACTOR, sampling);
      ImageHeader header = ImageHeader.probe(jpeg, PIXELS);
      ImageShape stored = new ImageShape(192, 256, 3);
      for (int reduce : new int[] {1, 2, 4, 8}) {
        try (Mat full = whole.decode(jpeg, header, 3, reduce)) {
          for (int t = 0; t < 10; t++) {
            int rw = 1 + rng.nextInt(full.cols());
            int rh = 1 + rng.nextInt(full.rows());
            Region r =
                new Region(
                    rng.nextInt(full.cols() - rw + 1), rng.nextInt(full.rows() - rh + 1), rw, rh);
            byte[] got = new byte[rw * rh * 3];
            assertNull(decode(jpeg, stored, reduce, r, got));
            try (Rect rect = new Rect(r.x(), r.y(), rw, rh);
                Mat expected = new Mat(full, rect)) {
              assertArrayEquals(
                  JpegRegionDecoderTest.bytes(expected), got, "1/" + reduce + " " + r);
            }
            byte[] viaOpenCv = new byte[got.length];
            try (BytePointer in = new BytePointer(jpeg);
                BytePointer target = new BytePointer(got.length)) {
              assertNull(
                  JpegRowDecoder.decodeWhole(
                      in.address(), jpeg.length, stored, reduce, r, target.address()));
              target.get(viaOpenCv);
            }
            assertArrayEquals(got, viaOpenCv, "the fallback's pixels, 1/" + reduce + " " + r);
          }
        }
      }
    }
  }

  @Test
  void aTruncatedJpegIsAnErrorNotGrey() {
    JpegRegionDecoderTest.assumeBuilt();
    byte[] jpeg = JpegRegionDecoderTest.jpeg(128, 96, 3, IMWRITE_JPEG_QUALITY, 90);
    byte[] cut = Arrays.copyOf(jpeg, jpeg.length / 2);
    String why =
        decode(
            cut, new ImageShape(96, 128, 3), 1, new Region(0, 0, 128, 96), new byte[128 * 96 * 3]);
    assertNotNull(why, "half a JPEG decoded without complaint");
    assertFalse(why.startsWith("unsupported"), why);
  }

  @Test
  void flippedBytesInTheScanAreAnError() {
    JpegRegionDecoderTest.assumeBuilt();
    byte[] jpeg = JpegRegionDecoderTest.jpeg(128, 96, 3, IMWRITE_JPEG_QUALITY, 90);
    byte[] damaged = jpeg.clone();
    for (int i = damaged.length / 3; i < damaged.length / 3 + 64; i++) {
      damaged[i] = (byte) 0xFF; // markers where entropy-coded data should be
    }
    String why =
        decode(
            damaged,
            new ImageShape(96, 128, 3),
            1,
            new Region(0, 0, 128, 96),
            new byte[128 * 96 * 3]);
    assertNotNull(why, "a damaged scan decoded without complaint");
  }

  @Test
  void aJpegOfAnotherSizeThanTheShardsIsAnError() {
    JpegRegionDecoderTest.assumeBuilt();
    byte[] jpeg = JpegRegionDecoderTest.jpeg(128, 96, 3);
    String why = decode(jpeg, new ImageShape(64, 64, 3), 1, new Region(0, 0, 8, 8), new byte[192]);
    assertNotNull(why);
    assertTrue(why.contains("128x96") && why.contains("64x64"), why);
  }

  @Test
  void bytesThatAreNoJpegAreAnError() {
    byte[] noise = new byte[500];
    new SplittableRandom(3).nextBytes(noise);
    assertNotNull(decode(noise, new ImageShape(8, 8, 3), 1, new Region(0, 0, 8, 8), new byte[192]));
    assertNotNull(
        decode(new byte[0], new ImageShape(8, 8, 3), 1, new Region(0, 0, 8, 8), new byte[192]));
  }
}
