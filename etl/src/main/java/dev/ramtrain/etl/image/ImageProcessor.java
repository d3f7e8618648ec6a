package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.CV_8UC1;
import static org.bytedeco.opencv.global.opencv_core.CV_8UC3;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_GRAY2RGB;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_RGB2GRAY;
import static org.bytedeco.opencv.global.opencv_imgproc.cvtColor;

import dev.ramtrain.etl.source.RawSample;
import dev.ramtrain.etl.source.RejectReason;
import dev.ramtrain.etl.source.RejectedImageException;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.random.Seeds;
import java.io.IOException;
import java.io.Serializable;
import java.util.SplittableRandom;
import org.bytedeco.opencv.global.opencv_core;
import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Rect;

/**
 * decode ▶ turn upright (EXIF orientation) ▶ colour ▶ resize ▶ augment for one sample, producing
 * the uint8 HWC RGB (or grey) images that go into a shard: the plain copy and {@code copies}
 * augmented ones.
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
  private final boolean decodeRegions;
  private final boolean exifOrientation;
  private transient ImageDecoder decoder;

  public ImageProcessor(
      ImageTransform transform, ImageDecoder.Kind decoderKind, long maxPixels, long seed) {
    this(transform, decoderKind, maxPixels, seed, true);
  }

  /**
   * {@code decodeRegions}: decode only the part of a JPEG the outputs show where the region decoder
   * is available (the same pixels either way; false only to measure what it buys).
   */
  public ImageProcessor(
      ImageTransform transform,
      ImageDecoder.Kind decoderKind,
      long maxPixels,
      long seed,
      boolean decodeRegions) {
    this(transform, decoderKind, maxPixels, seed, decodeRegions, true);
  }

  private ImageProcessor(
      ImageTransform transform,
      ImageDecoder.Kind decoderKind,
      long maxPixels,
      long seed,
      boolean decodeRegions,
      boolean exifOrientation) {
    this.decodeRegions = decodeRegions;
    this.transform = transform;
    this.decoderKind = decoderKind;
    this.maxPixels = maxPixels;
    this.seed = seed;
    this.exifOrientation = exifOrientation;
  }

  /**
   * This processor turning photos upright by their EXIF orientation ({@code apply}, the default, as
   * {@code PIL.ImageOps.exif_transpose}), or taking the stored pixels as they are.
   */
  public ImageProcessor withExifOrientation(boolean apply) {
    return new ImageProcessor(transform, decoderKind, maxPixels, seed, decodeRegions, apply);
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
    if (sample.isRaw()) {
      try (Mat source = fromPixels(sample)) {
        emit(source, new Region(0, 0, source.cols(), source.rows()), views(source, id), sink);
      }
      return;
    }
    byte[] bytes = sample.content();
    ImageHeader header = ImageHeader.probe(bytes, maxPixels);
    if (exifOrientation && header.orientation() != ExifOrientation.UPRIGHT) {
      // A photo stored sideways: decoded whole (regions are drawn on the upright image), turned.
      try (Mat stored = decode(bytes, header, reduceFactor(header.upright()));
          Mat source = ExifOrientation.apply(stored, header.orientation())) {
        emit(source, new Region(0, 0, source.cols(), source.rows()), views(source, id), sink);
      }
      return;
    }
    int reduce = reduceFactor(header);
    if (decodeRegions && header.format() == ImageHeader.Format.JPEG && regionDecoderUsable()) {
      // libjpeg's size at 1/reduce; the regions are drawn first so only their union is decoded
      // when it is small enough to pay (a centre crop of 3/4 of a photo decodes no faster).
      int w = ceilDiv(header.width(), reduce);
      int h = ceilDiv(header.height(), reduce);
      Views views = views(w, h, id);
      if (views.union().area() * 3 <= (long) w * h * 2) {
        try (Mat region =
            JpegRegionDecoder.decode(bytes, reduce, views.union(), shape().channels())) {
          if (region != null) {
            emit(region, views.union(), views, sink);
            return;
          }
        }
      }
    }
    try (Mat source = decode(bytes, header, reduce)) {
      emit(source, new Region(0, 0, source.cols(), source.rows()), views(source, id), sink);
    }
  }

  /**
   * What one sample's outputs show of a {@code w} x {@code h} image: the plain copy's region and
   * each augmented copy's crop with the generator that drew it (it draws that copy's flip, rotation
   * and colour next), all from (seed, id, copy) alone, and the union of those regions.
   */
  private record Views(Region plain, Region[] crops, SplittableRandom[] rngs, Region union) {}

  private Views views(Mat image, long id) {
    return views(image.cols(), image.rows(), id);
  }

  private Views views(int w, int h, long id) {
    Augmentation augmentation = transform.augmentation();
    Region plain = augmentation.keepOriginal() ? transform.plainRegion(w, h) : null;
    int copies = augmentation.copies();
    Region[] crops = new Region[copies];
    SplittableRandom[] rngs = new SplittableRandom[copies];
    Region union = plain;
    for (int c = 0; c < copies; c++) {
      rngs[c] = new SplittableRandom(Seeds.mix(seed, id, c + 1));
      crops[c] = transform.randomCrop(w, h, rngs[c]);
      union = union == null ? crops[c] : union.union(crops[c]);
    }
    return new Views(plain, crops, rngs, union == null ? new Region(0, 0, w, h) : union);
  }

  /** Emits every output of {@code views} from {@code source}, the pixels of {@code at}. */
  private void emit(Mat source, Region at, Views views, Sink sink) throws IOException {
    if (views.plain() != null) {
      try (Mat region = view(source, at, views.plain());
          Mat plain = transform.resizePlain(region)) {
        emit(0, plain, sink);
      }
    }
    for (int c = 0; c < views.crops().length; c++) {
      try (Mat crop = view(source, at, views.crops()[c]);
          Mat augmented = transform.augment(crop, views.rngs()[c])) {
        emit(c + 1, augmented, sink);
      }
    }
  }

  /** The part {@code r} of the image as a view into {@code source}, which holds {@code at}. */
  private static Mat view(Mat source, Region at, Region r) {
    try (Rect rect = new Rect(r.x() - at.x(), r.y() - at.y(), r.width(), r.height())) {
      return new Mat(source, rect);
    }
  }

  private static int ceilDiv(int a, int b) {
    return (a + b - 1) / b;
  }

  private boolean regionDecoderUsable() {
    return decoderKind == ImageDecoder.Kind.OPENCV && JpegRegionDecoder.available();
  }

  /** Decodes the whole image to RGB or grey, at 1/{@code reduce} size (JPEG only). */
  private Mat decode(byte[] bytes, ImageHeader header, int reduce) throws RejectedImageException {
    if (decoder == null) {
      // Spark already runs one task per core; OpenCV's own thread pool would oversubscribe them.
      opencv_core.setNumThreads(1);
      decoder = decoderKind.create();
    }
    return decoder.decode(bytes, header, shape().channels(), reduce);
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
