package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC1;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_COLOR;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_COLOR_RGB;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_GRAYSCALE;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_IGNORE_ORIENTATION;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_REDUCED_COLOR_2;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_REDUCED_COLOR_4;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_REDUCED_COLOR_8;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_REDUCED_GRAYSCALE_2;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_REDUCED_GRAYSCALE_4;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMREAD_REDUCED_GRAYSCALE_8;
import static org.bytedeco.opencv.global.opencv_imgcodecs.imdecode;

import dev.ramtrain.etl.source.RejectReason;
import dev.ramtrain.etl.source.RejectedImageException;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.opencv.opencv_core.Mat;

/**
 * Decodes with OpenCV's codecs (libjpeg-turbo, libpng), natives from Maven Central. CMYK/YCCK
 * JPEGs, grey, palette, 16-bit and alpha PNGs all come out as 8-bit RGB or grey (libjpeg-turbo
 * writes RGB directly, so no colour-swap pass follows). EXIF orientation is ignored, as
 * torchvision's ImageFolder does.
 */
final class OpenCvDecoder implements ImageDecoder {
  private final ImageDecoder gifDecoder;

  OpenCvDecoder(ImageDecoder gifDecoder) {
    this.gifDecoder = gifDecoder;
  }

  @Override
  public Mat decode(byte[] bytes, ImageHeader header, int channels, int reduce)
      throws RejectedImageException {
    if (header.format() == ImageHeader.Format.GIF) {
      return gifDecoder.decode(bytes, header, channels, 1);
    }
    int flags = flags(channels, header.format() == ImageHeader.Format.JPEG ? reduce : 1);
    Mat image;
    try (BytePointer data = new BytePointer(bytes);
        Mat encoded = new Mat(1, bytes.length, CV_8UC1, data)) {
      image = imdecode(encoded, flags | IMREAD_IGNORE_ORIENTATION);
    }
    if (image == null || image.empty()) {
      if (image != null) {
        image.close();
      }
      throw new RejectedImageException(
          RejectReason.CORRUPT, header.format() + " could not be decoded");
    }
    return image;
  }

  /**
   * The imdecode mode: grey or RGB, decoded at 1/{@code reduce} in the DCT. OpenCV 4.13 refuses
   * IMREAD_COLOR_RGB combined with IMREAD_COLOR or a REDUCED_COLOR mode (cv::calcType), so RGB
   * takes the reduction's bits alone (REDUCED_COLOR_n without its COLOR bit).
   */
  private static int flags(int channels, int reduce) {
    if (channels == 1) {
      return switch (reduce) {
        case 2 -> IMREAD_REDUCED_GRAYSCALE_2;
        case 4 -> IMREAD_REDUCED_GRAYSCALE_4;
        case 8 -> IMREAD_REDUCED_GRAYSCALE_8;
        default -> IMREAD_GRAYSCALE;
      };
    }
    int reduction =
        switch (reduce) {
          case 2 -> IMREAD_REDUCED_COLOR_2;
          case 4 -> IMREAD_REDUCED_COLOR_4;
          case 8 -> IMREAD_REDUCED_COLOR_8;
          default -> IMREAD_COLOR;
        };
    return IMREAD_COLOR_RGB | (reduction & ~IMREAD_COLOR);
  }
}
