package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC;
import static org.bytedeco.opencv.global.opencv_core.flip;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.util.SplittableRandom;
import org.apache.arrow.memory.util.MemoryUtil;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Rect;
import org.junit.jupiter.api.Test;

/**
 * The loader's crops on preprocessing's filter: from memory to memory, the pixels of a crop Mat
 * resized by {@link Resample}, windowed and flipped by OpenCV, exactly.
 */
class CropResizeTest {
  @Test
  void aRegionResizedWindowedAndMirroredIsResamplesOwn() {
    int h = 37;
    int w = 45;
    for (int channels : new int[] {3, 1}) {
      ByteBuffer image = ByteBuffer.allocateDirect(h * w * channels);
      byte[] noise = new byte[image.capacity()];
      new SplittableRandom(channels).nextBytes(noise);
      image.put(0, noise);
      int[][] cases = { // region x, y, w, h; resized w, h; window x, y, w, h
        {0, 0, 45, 37, 16, 16, 0, 0, 16, 16}, // shrink more than 2x: area
        {5, 3, 28, 30, 20, 24, 0, 0, 20, 24}, // shrink by less: Gaussian + bilinear
        {2, 10, 13, 9, 31, 24, 0, 0, 31, 24}, // enlarge: bilinear
        {0, 0, 45, 37, 24, 20, 4, 2, 16, 16}, // resize then centre window (evaluation)
      };
      for (int[] c : cases) {
        for (boolean mirror : new boolean[] {false, true}) {
          int outBytes = c[8] * c[9] * channels;
          ByteBuffer got = ByteBuffer.allocateDirect(outBytes);
          CropResize.into(
              MemoryUtil.getByteBufferAddress(image),
              h,
              w,
              channels,
              new Region(c[0], c[1], c[2], c[3]),
              c[5],
              c[4],
              new Region(c[6], c[7], c[8], c[9]),
              mirror,
              MemoryUtil.getByteBufferAddress(got));
          byte[] actual = new byte[outBytes];
          got.get(0, actual);
          assertArrayEquals(reference(noise, h, w, channels, c, mirror), actual, channels + "ch");
        }
      }
    }
  }

  /** The same by Mats: crop, Resample.to, window, flip. */
  private static byte[] reference(
      byte[] pixels, int h, int w, int channels, int[] c, boolean mirror) {
    try (Mat whole = new Mat(h, w, CV_8UC(channels));
        Rect r = new Rect(c[0], c[1], c[2], c[3])) {
      whole.data().put(pixels);
      try (Mat crop = new Mat(whole, r);
          Mat resized = Resample.to(crop, c[4], c[5]);
          Rect wr = new Rect(c[6], c[7], c[8], c[9]);
          Mat window = new Mat(resized, wr);
          Mat out = new Mat()) {
        if (mirror) {
          flip(window, out, 1);
        } else {
          window.copyTo(out);
        }
        byte[] bytes = new byte[c[8] * c[9] * channels];
        out.data().get(bytes);
        return bytes;
      }
    }
  }

  @Test
  void aRegionOutsideTheImageIsRefused() {
    try (BytePointer p = new BytePointer(10 * 10 * 3)) {
      assertThrows(
          IllegalArgumentException.class,
          () ->
              CropResize.into(
                  p.address(),
                  10,
                  10,
                  3,
                  new Region(5, 5, 6, 5),
                  4,
                  4,
                  new Region(0, 0, 4, 4),
                  false,
                  p.address()));
    }
  }
}
