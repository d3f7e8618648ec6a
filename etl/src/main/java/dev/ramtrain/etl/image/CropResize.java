package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC;
import static org.bytedeco.opencv.global.opencv_core.flip;

import org.apache.arrow.memory.util.MemoryUtil;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.opencv.global.opencv_core;
import org.bytedeco.opencv.global.opencv_imgproc;
import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Rect;

/**
 * Preprocessing's resize ({@link Resample}) on pixels in memory: a region of an 8-bit interleaved
 * image resized, a window of the result kept, mirrored or not, written to memory. What the
 * trainer's loader runs for a random resized crop from a mapped shard into its staging slot, so
 * that crops drawn at load time are filtered as preprocessing filters stored images. Reads and
 * writes the caller's memory in place (no copy in); one thread per call once {@link #preload} has
 * run (the loader's workers are the parallelism).
 */
public final class CropResize {
  private CropResize() {}

  /**
   * Loads OpenCV's natives now (about 0.4 s), so that a loader's first batches do not wait for them
   * (they showed as a data stall of the first epoch), and keeps OpenCV to the calling thread: the
   * loader's workers already use every core. Call it before {@link #into}.
   */
  public static void preload() {
    Loader.load(opencv_imgproc.class);
    opencv_core.setNumThreads(1);
  }

  /**
   * {@code image}: {@code imageHeight × imageWidth × channels} bytes at that address; {@code
   * region} of it is resized to {@code resizedWidth × resizedHeight}, of which {@code window}
   * (within the resized image) is written at {@code target}, each row mirrored when {@code mirror}.
   */
  public static void into(
      long image,
      int imageHeight,
      int imageWidth,
      int channels,
      Region region,
      int resizedHeight,
      int resizedWidth,
      Region window,
      boolean mirror,
      long target) {
    if (region.x() < 0
        || region.y() < 0
        || region.x() + region.width() > imageWidth
        || region.y() + region.height() > imageHeight
        || window.x() < 0
        || window.y() < 0
        || window.x() + window.width() > resizedWidth
        || window.y() + window.height() > resizedHeight) {
      throw new IllegalArgumentException(
          "crop "
              + region
              + " of a "
              + imageHeight
              + "x"
              + imageWidth
              + " image, window "
              + window
              + " of "
              + resizedHeight
              + "x"
              + resizedWidth);
    }
    int bytes = imageHeight * imageWidth * channels;
    int outBytes = window.height() * window.width() * channels;
    try (BytePointer src = new BytePointer(MemoryUtil.directBuffer(image, bytes));
        Mat whole = new Mat(imageHeight, imageWidth, CV_8UC(channels), src);
        Rect r = new Rect(region.x(), region.y(), region.width(), region.height());
        Mat crop = new Mat(whole, r);
        BytePointer dst = new BytePointer(MemoryUtil.directBuffer(target, outBytes));
        Mat out = new Mat(window.height(), window.width(), CV_8UC(channels), dst)) {
      boolean wholeWindow =
          window.x() == 0
              && window.y() == 0
              && window.width() == resizedWidth
              && window.height() == resizedHeight;
      if (wholeWindow) { // a training crop: resized straight into the slot, flipped there
        Resample.into(crop, out, resizedWidth, resizedHeight);
        if (mirror) {
          flip(out, out, 1);
        }
        return;
      }
      try (Mat resized = Resample.to(crop, resizedWidth, resizedHeight);
          Rect w = new Rect(window.x(), window.y(), window.width(), window.height());
          Mat kept = new Mat(resized, w)) {
        if (mirror) {
          flip(kept, out, 1);
        } else {
          kept.copyTo(out);
        }
      }
    }
  }
}
