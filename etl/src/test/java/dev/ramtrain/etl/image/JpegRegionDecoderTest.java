package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC1;
import static org.bytedeco.opencv.global.opencv_core.CV_8UC3;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_PROGRESSIVE;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_QUALITY;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_RST_INTERVAL;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_SAMPLING_FACTOR;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_SAMPLING_FACTOR_411;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_SAMPLING_FACTOR_420;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_SAMPLING_FACTOR_422;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_SAMPLING_FACTOR_444;
import static org.bytedeco.opencv.global.opencv_imgcodecs.imencode;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.format.ImageShape;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.indexer.UByteIndexer;
import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Rect;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * A region decode must equal the whole image's decode (OpenCV's, the path taken without the
 * library) at that region, pixel for pixel, for every JPEG flavour and scale: only then may the
 * processor choose between them by speed alone.
 */
class JpegRegionDecoderTest {
  private static final long PIXELS = 1L << 26;

  /** Where the build had what it needs (build.sh), the library must have been built and loaded. */
  static void assumeBuilt() {
    boolean buildable =
        Files.exists(Path.of("/usr/include/jpeglib.h"))
            && "Linux".equals(System.getProperty("os.name"))
            && "amd64".equals(System.getProperty("os.arch"));
    Assumptions.assumeTrue(buildable, "no libjpeg62-turbo-dev here: the library is not built");
    assertTrue(JpegRegionDecoder.available(), "built but not loaded: see the log");
  }

  /** A textured test image (gradients, edges and noise), odd-sized so MCUs overhang both edges. */
  static byte[] jpeg(int width, int height, int channels, int... params) {
    SplittableRandom rng = new SplittableRandom(width * 31L + height);
    try (Mat image = new Mat(height, width, channels == 1 ? CV_8UC1 : CV_8UC3);
        BytePointer out = new BytePointer();
        IntPointer options = new IntPointer(params)) {
      UByteIndexer px = image.createIndexer();
      for (int y = 0; y < height; y++) {
        for (int x = 0; x < width; x++) {
          for (int c = 0; c < channels; c++) {
            int v =
                (int) (128 + 80 * Math.sin(x / 9.0 + c) * Math.cos(y / 13.0))
                    + rng.nextInt(-20, 21);
            px.put(y, x, c, Math.max(0, Math.min(255, ((x / 17 + y / 11) % 2 == 0 ? v : 255 - v))));
          }
        }
      }
      px.close();
      imencode(".jpg", image, out, options);
      byte[] bytes = new byte[(int) out.limit()];
      out.get(bytes);
      return bytes;
    }
  }

  private static List<byte[]> flavours() {
    List<byte[]> jpegs = new ArrayList<>();
    for (int sampling :
        new int[] {
          IMWRITE_JPEG_SAMPLING_FACTOR_420,
          IMWRITE_JPEG_SAMPLING_FACTOR_422,
          IMWRITE_JPEG_SAMPLING_FACTOR_444,
          IMWRITE_JPEG_SAMPLING_FACTOR_411
        }) {
      jpegs.add(
          jpeg(301, 203, 3, IMWRITE_JPEG_QUALITY, 90, IMWRITE_JPEG_SAMPLING_FACTOR, sampling));
    }
    jpegs.add(jpeg(257, 190, 3, IMWRITE_JPEG_PROGRESSIVE, 1));
    jpegs.add(jpeg(240, 161, 3, IMWRITE_JPEG_RST_INTERVAL, 3));
    jpegs.add(jpeg(199, 123, 1, IMWRITE_JPEG_QUALITY, 85)); // a greyscale JPEG
    return jpegs;
  }

  static byte[] bytes(Mat m) {
    byte[] out = new byte[(int) m.total() * m.channels()];
    if (m.isContinuous()) {
      m.data().get(out);
    } else {
      try (Mat copy = m.clone()) {
        copy.data().get(out);
      }
    }
    return out;
  }

  @Test
  void aRegionIsTheWholeDecodeCroppedAtEveryScaleAndFlavour() throws Exception {
    assumeBuilt();
    OpenCvDecoder whole = new OpenCvDecoder(new ImageIoDecoder());
    SplittableRandom rng = new SplittableRandom(5);
    int checked = 0;
    for (byte[] jpeg : flavours()) {
      ImageHeader header = ImageHeader.probe(jpeg, PIXELS);
      for (int channels : new int[] {3, 1}) {
        for (int reduce : new int[] {1, 2, 4, 8}) {
          try (Mat full = whole.decode(jpeg, header, channels, reduce)) {
            int w = (header.width() + reduce - 1) / reduce;
            int h = (header.height() + reduce - 1) / reduce;
            assertEquals(w, full.cols(), "libjpeg's scaled width");
            assertEquals(h, full.rows(), "libjpeg's scaled height");
            for (int t = 0; t < 12; t++) {
              int rw = t == 0 ? w : 1 + rng.nextInt(w);
              int rh = t == 0 ? h : 1 + rng.nextInt(h);
              Region r = new Region(rng.nextInt(w - rw + 1), rng.nextInt(h - rh + 1), rw, rh);
              try (Rect rect = new Rect(r.x(), r.y(), rw, rh);
                  Mat expected = new Mat(full, rect);
                  Mat region = JpegRegionDecoder.decode(jpeg, reduce, r, channels)) {
                String where =
                    String.format(
                        "%dx%d, %d channels, 1/%d, region %d,%d %dx%d",
                        header.width(), header.height(), channels, reduce, r.x(), r.y(), rw, rh);
                assertArrayEquals(bytes(expected), bytes(region), where);
                checked++;
              }
            }
          }
        }
      }
    }
    assertEquals(7 * 2 * 4 * 12, checked);
  }

  @Test
  void whatItCannotDecodeExactlyIsLeftToTheWholeDecode() {
    assumeBuilt();
    byte[] jpeg = jpeg(64, 48, 3);
    byte[] cut = java.util.Arrays.copyOf(jpeg, 40); // headers only: no image data
    assertNull(JpegRegionDecoder.decode(cut, 1, new Region(0, 0, 8, 8), 3));
    assertNull(JpegRegionDecoder.decode(jpeg, 1, new Region(60, 40, 8, 9), 3));
  }

  /** The processor draws crops first and decodes their union: the outputs may not change. */
  @Test
  void outputsAreTheSameWithAndWithoutRegionDecoding() throws Exception {
    assumeBuilt();
    Augmentation twoCrops =
        new Augmentation(2, false, 0.08, 1.0, 0.75, 1.33, 0.5, 10, 0.2, 0.2, 0.2);
    Augmentation plainAndCrop = new Augmentation(1, true, 0.08, 1.0, 0.75, 1.33, 0.5, 0, 0, 0, 0);
    // Always under the 2/3 of the image above which the processor decodes whole images.
    Augmentation smallCrop = new Augmentation(1, false, 0.05, 0.3, 0.75, 1.33, 0.5, 0, 0, 0, 0);
    for (ResizeMode mode : ResizeMode.values()) {
      for (Augmentation a :
          new Augmentation[] {Augmentation.NONE, twoCrops, plainAndCrop, smallCrop}) {
        ImageTransform transform = new ImageTransform(new ImageShape(48, 40, 3), mode, a);
        ImageProcessor regions =
            new ImageProcessor(transform, ImageDecoder.Kind.OPENCV, PIXELS, 9, true);
        ImageProcessor whole =
            new ImageProcessor(transform, ImageDecoder.Kind.OPENCV, PIXELS, 9, false);
        for (byte[] jpeg : flavours()) {
          for (long id = 0; id < 6; id++) {
            RawSample sample = RawSample.encoded("k", jpeg, 0, null);
            List<byte[]> a1 = ImageTransformTest.outputs(sample, regions, id);
            List<byte[]> a2 = ImageTransformTest.outputs(sample, whole, id);
            assertEquals(a2.size(), a1.size());
            for (int i = 0; i < a1.size(); i++) {
              assertArrayEquals(
                  a2.get(i), a1.get(i), mode + " " + a + " id " + id + " output " + i);
            }
          }
        }
      }
    }
  }
}
