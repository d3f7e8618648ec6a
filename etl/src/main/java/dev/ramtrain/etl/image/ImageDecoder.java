package dev.ramtrain.etl.image;

import dev.ramtrain.etl.source.RejectedImageException;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.opencv.global.opencv_imgcodecs;
import org.bytedeco.opencv.global.opencv_imgproc;
import org.bytedeco.opencv.opencv_core.Mat;

/** Turns encoded bytes into an 8-bit RGB (3 channels) or grey (1 channel) OpenCV image. */
public interface ImageDecoder {

  /**
   * Decodes {@code bytes}; for JPEG, {@code reduce} (1, 2, 4 or 8) asks for a DCT-domain downscale
   * where the decoder supports it. The caller owns (closes) the returned Mat.
   */
  Mat decode(byte[] bytes, ImageHeader header, int channels, int reduce)
      throws RejectedImageException;

  /** The decoders to choose from ({@code ramtrain.etl.decoder}). */
  enum Kind {
    /** libjpeg-turbo/libpng through OpenCV; GIF goes through ImageIO (OpenCV has no GIF reader). */
    OPENCV,
    /** The JDK's ImageIO (no CMYK JPEG). */
    IMAGEIO;

    /**
     * Loads the decoder's native libraries now (OpenCV's take about 0.7 CPU-seconds), so that a
     * caller can do it on a spare thread instead of inside the first task.
     */
    public void loadNatives() {
      if (this == OPENCV) {
        Loader.load(opencv_imgcodecs.class);
        Loader.load(opencv_imgproc.class);
      }
    }

    public ImageDecoder create() {
      ImageIoDecoder imageIo = new ImageIoDecoder();
      return this == IMAGEIO ? imageIo : new OpenCvDecoder(imageIo);
    }
  }
}
