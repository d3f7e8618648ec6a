package dev.ramtrain.etl.image;

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

    public ImageDecoder create() {
      ImageIoDecoder imageIo = new ImageIoDecoder();
      return this == IMAGEIO ? imageIo : new OpenCvDecoder(imageIo);
    }
  }
}
