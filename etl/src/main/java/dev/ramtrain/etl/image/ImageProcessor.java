package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC1;
import static org.bytedeco.opencv.global.opencv_core.CV_8UC3;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_GRAY2RGB;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_RGB2GRAY;
import static org.bytedeco.opencv.global.opencv_imgproc.cvtColor;

import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.format.ids.SampleIds;
import java.io.IOException;
import java.io.Serializable;
import java.util.SplittableRandom;
import org.bytedeco.opencv.global.opencv_core;
import org.bytedeco.opencv.opencv_core.Mat;

/**
 * decode ▶ colour ▶ resize ▶ augment for one sample, producing the uint8 HWC RGB (or grey) images
 * that go into a shard: the plain copy and {@code copies} augmented ones.
 */
public final class ImageProcessor implements Serializable {

  /** Receives each finished image; the pixels are valid only during the call. */
  public interface Sink {
    void accept(int copy, long pixelAddress) throws IOException;
  }

  private final ImageTransform transform;
  private final ImageDecoder.Kind decoderKind;
  private final long maxPixels;
  private final long seed;
  private transient ImageDecoder decoder;

  public ImageProcessor(
      ImageTransform transform, ImageDecoder.Kind decoderKind, long maxPixels, long seed) {
    this.transform = transform;
    this.decoderKind = decoderKind;
    this.maxPixels = maxPixels;
    this.seed = seed;
  }

  public ImageShape shape() {
    return transform.shape();
  }

  public Augmentation augmentation() {
    return transform.augmentation();
  }

  /** Processes one sample whose stable id is {@code id}; throws for inputs to reject. */
  public void process(RawSample sample, long id, Sink sink)
      throws RejectedImageException, IOException {
    Augmentation augmentation = transform.augmentation();
    try (Mat source = sample.isRaw() ? fromPixels(sample) : decode(sample.content())) {
      if (augmentation.keepOriginal()) {
        try (Mat plain = transform.resizePlain(source)) {
          emit(0, plain, sink);
        }
      }
      for (int copy = 1; copy <= augmentation.copies(); copy++) {
        SplittableRandom rng = new SplittableRandom(SampleIds.mix(seed, id, copy));
        try (Mat augmented = transform.augment(source, rng)) {
          emit(copy, augmented, sink);
        }
      }
    }
  }

  /** Decodes encoded bytes to RGB or grey, at reduced size when the output needs fewer pixels. */
  public Mat decode(byte[] bytes) throws RejectedImageException {
    ImageHeader header = ImageHeader.probe(bytes, maxPixels);
    if (decoder == null) {
      // Spark already runs one task per core; OpenCV's own thread pool would oversubscribe them.
      opencv_core.setNumThreads(1);
      decoder = decoderKind.create();
    }
    return decoder.decode(bytes, header, shape().channels(), reduceFactor(header));
  }

  /**
   * The largest JPEG DCT scale-down (1/2, 1/4, 1/8) that still leaves at least as many source
   * pixels as the output samples, for the plain copy and for the smallest crop an augmented copy
   * may take.
   */
  int reduceFactor(ImageHeader header) {
    int w = header.width();
    int h = header.height();
    int tw = shape().width();
    int th = shape().height();
    double needed =
        switch (transform.mode()) {
          case SHORTER_SIDE_CROP, STRETCH -> Math.max((double) tw / w, (double) th / h);
          case LETTERBOX -> Math.min((double) tw / w, (double) th / h);
        };
    Augmentation a = transform.augmentation();
    if (a.copies() > 0) {
      double smallestCropSide = Math.sqrt(a.scaleMin()) * Math.min(w, h);
      needed = Math.max(needed, Math.max(tw, th) / smallestCropSide);
    }
    for (int factor = 8; factor > 1; factor /= 2) {
      if (needed * factor <= 1.0) {
        return factor;
      }
    }
    return 1;
  }

  private Mat fromPixels(RawSample s) throws RejectedImageException {
    long expected = (long) s.width() * s.height() * s.channels();
    if ((s.channels() != 1 && s.channels() != 3) || s.content().length != expected) {
      throw new RejectedImageException(
          RejectReason.BAD_RAW_SHAPE,
          s.content().length + " bytes for " + s.height() + "x" + s.width() + "x" + s.channels());
    }
    Mat raw = new Mat(s.height(), s.width(), s.channels() == 1 ? CV_8UC1 : CV_8UC3);
    raw.data().put(s.content(), 0, s.content().length);
    int wanted = shape().channels();
    if (s.channels() == wanted) {
      return raw;
    }
    try (raw) {
      Mat out = new Mat();
      cvtColor(raw, out, wanted == 1 ? COLOR_RGB2GRAY : COLOR_GRAY2RGB);
      return out;
    }
  }

  private void emit(int copy, Mat image, Sink sink) throws IOException {
    if (!image.isContinuous()
        || image.cols() != shape().width()
        || image.rows() != shape().height()
        || image.channels() != shape().channels()) {
      throw new IllegalStateException(
          "transform produced "
              + image.rows()
              + "x"
              + image.cols()
              + "x"
              + image.channels()
              + " for shape "
              + shape());
    }
    sink.accept(copy, image.data().address());
  }
}
