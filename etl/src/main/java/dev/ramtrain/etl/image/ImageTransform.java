package dev.ramtrain.etl.image;

import static org.bytedeco.opencv.global.opencv_core.BORDER_CONSTANT;
import static org.bytedeco.opencv.global.opencv_core.addWeighted;
import static org.bytedeco.opencv.global.opencv_core.copyMakeBorder;
import static org.bytedeco.opencv.global.opencv_core.flip;
import static org.bytedeco.opencv.global.opencv_core.mean;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_GRAY2RGB;
import static org.bytedeco.opencv.global.opencv_imgproc.COLOR_RGB2GRAY;
import static org.bytedeco.opencv.global.opencv_imgproc.INTER_LINEAR;
import static org.bytedeco.opencv.global.opencv_imgproc.cvtColor;
import static org.bytedeco.opencv.global.opencv_imgproc.getRotationMatrix2D;
import static org.bytedeco.opencv.global.opencv_imgproc.warpAffine;

import dev.ramtrain.format.ImageShape;
import java.io.Serializable;
import java.util.SplittableRandom;
import org.bytedeco.opencv.opencv_core.Mat;
import org.bytedeco.opencv.opencv_core.Point2f;
import org.bytedeco.opencv.opencv_core.Scalar;
import org.bytedeco.opencv.opencv_core.Size;

/**
 * Geometry and colour on decoded images: the fixed-size resize of the plain copy, and the random
 * augmentations of the extra copies. Every method returns a new, continuous Mat owned by the caller
 * and leaves its input alone.
 */
public record ImageTransform(ImageShape shape, ResizeMode mode, Augmentation augmentation)
    implements Serializable {

  /**
   * The part of a {@code w} x {@code h} image the plain copy shows: for shorter-side-crop the
   * centre region with the target's aspect ratio (cropped first, then scaled once), else all of it.
   */
  public Region plainRegion(int w, int h) {
    if (mode != ResizeMode.SHORTER_SIDE_CROP) {
      return new Region(0, 0, w, h);
    }
    double scale = Math.max((double) shape.width() / w, (double) shape.height() / h);
    int cw = Math.min(w, (int) Math.round(shape.width() / scale));
    int ch = Math.min(h, (int) Math.round(shape.height() / scale));
    return new Region((w - cw) / 2, (h - ch) / 2, cw, ch);
  }

  /** The plain copy of {@code region}, the pixels of the image's {@link #plainRegion}. */
  public Mat resizePlain(Mat region) {
    int w = region.cols();
    int h = region.rows();
    int tw = shape.width();
    int th = shape.height();
    return switch (mode) {
      case STRETCH, SHORTER_SIDE_CROP -> scaled(region, tw, th);
      case LETTERBOX -> {
        double scale = Math.min((double) tw / w, (double) th / h);
        int sw = Math.max(1, Math.min(tw, (int) Math.round(w * scale)));
        int sh = Math.max(1, Math.min(th, (int) Math.round(h * scale)));
        try (Mat fitted = scaled(region, sw, sh)) {
          Mat out = new Mat();
          int top = (th - sh) / 2;
          int left = (tw - sw) / 2;
          copyMakeBorder(
              fitted,
              out,
              top,
              th - sh - top,
              left,
              tw - sw - left,
              BORDER_CONSTANT,
              new Scalar(0.0));
          yield out;
        }
      }
    };
  }

  /**
   * One augmented copy of {@code crop}, the region {@link #randomCrop} drew with the same {@code
   * rng}: scaled to the target size, then flip, rotation and colour jitter drawn from {@code rng}.
   */
  public Mat augment(Mat crop, SplittableRandom rng) {
    Mat image = scaled(crop, shape.width(), shape.height());
    Augmentation a = augmentation;
    if (rng.nextDouble() < a.flipProbability()) {
      Mat flipped = new Mat();
      flip(image, flipped, 1);
      image = replace(image, flipped);
    }
    if (a.rotationDegrees() > 0) {
      double angle = uniform(rng, -a.rotationDegrees(), a.rotationDegrees());
      try (Point2f centre = new Point2f(shape.width() / 2f, shape.height() / 2f);
          Mat rotation = getRotationMatrix2D(centre, angle, 1.0);
          Size size = new Size(shape.width(), shape.height())) {
        Mat rotated = new Mat();
        warpAffine(image, rotated, rotation, size, INTER_LINEAR, BORDER_CONSTANT, new Scalar(0.0));
        image = replace(image, rotated);
      }
    }
    if (a.brightness() > 0) {
      double factor = uniform(rng, 1 - a.brightness(), 1 + a.brightness());
      Mat out = new Mat();
      image.convertTo(out, -1, factor, 0);
      image = replace(image, out);
    }
    if (a.contrast() > 0) {
      double factor = uniform(rng, 1 - a.contrast(), 1 + a.contrast());
      double grey = greyMean(image);
      Mat out = new Mat();
      image.convertTo(out, -1, factor, (1 - factor) * grey);
      image = replace(image, out);
    }
    if (a.saturation() > 0 && image.channels() == 3) {
      double factor = uniform(rng, 1 - a.saturation(), 1 + a.saturation());
      try (Mat grey = new Mat();
          Mat grey3 = new Mat()) {
        cvtColor(image, grey, COLOR_RGB2GRAY);
        cvtColor(grey, grey3, COLOR_GRAY2RGB);
        Mat out = new Mat();
        addWeighted(image, factor, grey3, 1 - factor, 0, out);
        image = replace(image, out);
      }
    }
    return image;
  }

  /**
   * torchvision's RandomResizedCrop region of a {@code w} x {@code h} image: area fraction and
   * log-aspect drawn uniformly, 10 tries, then the centre crop within the aspect limits. Drawn
   * before decoding, so only the region needs decoding.
   */
  public Region randomCrop(int w, int h, SplittableRandom rng) {
    Augmentation a = augmentation;
    double area = (double) w * h;
    for (int attempt = 0; attempt < 10; attempt++) {
      double targetArea = area * uniform(rng, a.scaleMin(), a.scaleMax());
      double aspect = Math.exp(uniform(rng, Math.log(a.ratioMin()), Math.log(a.ratioMax())));
      int cw = (int) Math.round(Math.sqrt(targetArea * aspect));
      int ch = (int) Math.round(Math.sqrt(targetArea / aspect));
      if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
        return new Region(rng.nextInt(w - cw + 1), rng.nextInt(h - ch + 1), cw, ch);
      }
    }
    double ratio = (double) w / h;
    int cw = w;
    int ch = h;
    if (ratio < a.ratioMin()) {
      ch = (int) Math.round(w / a.ratioMin());
    } else if (ratio > a.ratioMax()) {
      cw = (int) Math.round(h * a.ratioMax());
    }
    return new Region((w - cw) / 2, (h - ch) / 2, cw, ch);
  }

  private static Mat scaled(Mat src, int width, int height) {
    return Resample.to(src, width, height);
  }

  private static double greyMean(Mat image) {
    if (image.channels() == 1) {
      try (Scalar m = mean(image)) {
        return m.get(0);
      }
    }
    try (Mat grey = new Mat()) {
      cvtColor(image, grey, COLOR_RGB2GRAY);
      try (Scalar m = mean(grey)) {
        return m.get(0);
      }
    }
  }

  private static Mat replace(Mat old, Mat fresh) {
    old.close();
    return fresh;
  }

  private static double uniform(SplittableRandom rng, double lo, double hi) {
    return lo == hi ? lo : lo + (hi - lo) * rng.nextDouble();
  }
}
