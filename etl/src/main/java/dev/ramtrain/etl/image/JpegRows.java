package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC;
import static org.bytedeco.opencv.global.opencv_imgcodecs.IMWRITE_JPEG_QUALITY;
import static org.bytedeco.opencv.global.opencv_imgcodecs.imencode;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_RGB2BGR;
import static org.bytedeco.opencv.global.opencv_imgproc.cvtColor;

import dev.ramtrain.etl.source.RejectedImageException;
import dev.ramtrain.format.ImageShape;
import org.apache.arrow.memory.util.MemoryUtil;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.opencv.opencv_core.Mat;

/**
 * Chooses and makes what an encoded shard stores for one finished image ({@link ImageStorage}): the
 * source's own JPEG, a fresh one, or null for the pixels themselves. One per task (it keeps
 * scratch); close it when the shard is written.
 */
public final class JpegRows implements AutoCloseable {
  private final ImageStorage storage;
  private final ImageShape shape;
  private final Mat bgr = new Mat();
  private final BytePointer encoded = new BytePointer();
  private final IntPointer params;
  private final BytePointer decoded;

  public JpegRows(ImageStorage storage, ImageShape shape) {
    if (!storage.encoded()) {
      throw new IllegalArgumentException("raw storage encodes nothing");
    }
    this.storage = storage;
    this.shape = shape;
    this.params = new IntPointer(IMWRITE_JPEG_QUALITY, storage.quality());
    this.decoded = new BytePointer(shape.bytes());
  }

  /**
   * What to store for the {@code shape} pixels at {@code pixels}: JPEG bytes, or null to store the
   * pixels. {@code source}: the encoded input they were decoded from where nothing but decoding
   * made them (the plain copy), else null.
   */
  public byte[] encode(long pixels, byte[] source) throws RejectedImageException {
    if (source != null && decodesTo(source, pixels)) {
      return keepIfSmaller(source);
    }
    int type = CV_8UC(shape.channels());
    try (BytePointer at = new BytePointer(MemoryUtil.directBuffer(pixels, shape.bytes()));
        Mat image = new Mat(shape.height(), shape.width(), type, at)) {
      Mat input = image;
      if (shape.channels() == 3) { // OpenCV's encoder takes BGR
        cvtColor(image, bgr, COLOR_RGB2BGR);
        input = bgr;
      }
      if (!imencode(".jpg", input, encoded, params)) {
        throw new IllegalStateException("OpenCV could not encode a " + shape + " JPEG");
      }
    }
    byte[] jpeg = new byte[(int) encoded.limit()];
    encoded.position(0).get(jpeg);
    return keepIfSmaller(jpeg);
  }

  private byte[] keepIfSmaller(byte[] jpeg) {
    return storage.mode() == ImageStorage.Mode.AUTO && 2L * jpeg.length > shape.bytes()
        ? null
        : jpeg;
  }

  /**
   * Whether {@code source} is a sequential JPEG of the stored size that the loader's strict decode
   * turns into exactly these pixels: then storing it loses nothing and costs no re-encoding.
   */
  private boolean decodesTo(byte[] source, long pixels) throws RejectedImageException {
    // Already probed against the size limit when it was decoded; here only its size matters.
    ImageHeader header = ImageHeader.probe(source, Long.MAX_VALUE);
    if (!header.sequentialJpeg()
        || header.orientation() != ExifOrientation.UPRIGHT
        || header.width() != shape.width()
        || header.height() != shape.height()) {
      return false;
    }
    try (BytePointer bytes = new BytePointer(source)) {
      String why =
          JpegRowDecoder.decode(
              bytes.address(),
              source.length,
              shape,
              1,
              new Region(0, 0, shape.width(), shape.height()),
              decoded.address());
      return why == null
          && MemoryUtil.directBuffer(decoded.address(), shape.bytes())
              .equals(MemoryUtil.directBuffer(pixels, shape.bytes()));
    }
  }

  @Override
  public void close() {
    bgr.close();
    encoded.close();
    params.close();
    decoded.close();
  }
}
