package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.image.CropResize;
import dev.ramtrain.etl.image.Region;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.data.AntialiasedResize;
import dev.ramtrain.trainer.data.CropPlan;
import dev.ramtrain.trainer.data.CropResampler;
import java.util.function.Supplier;

/**
 * The filter a run resizes its load-time crops with ({@code ramtrain.train.augment.filter}):
 * PREPROCESSING's (etl's OpenCV resample, what stored images were resized with; about four times
 * faster) or PILLOW's antialiased bilinear to the pixel (trainer's plain-Java kernel, for parity
 * with a torchvision pipeline on PIL images). Evaluation and predict use the run's filter.
 */
public enum ResizeFilter {
  PREPROCESSING,
  PILLOW;

  /** A resampler per loader batch (OpenCV's natives loaded here, before the first batch). */
  public Supplier<CropResampler> resamplers() {
    if (this == PILLOW) {
      return AntialiasedResize::new;
    }
    CropResize.preload();
    return () -> ResizeFilter::preprocessing;
  }

  private static void preprocessing(
      long image, ImageShape stored, CropPlan plan, ImageShape out, boolean mirror, long target) {
    CropResize.into(
        image,
        stored.height(),
        stored.width(),
        stored.channels(),
        new Region(plan.left(), plan.top(), plan.width(), plan.height()),
        plan.resizedHeight(),
        plan.resizedWidth(),
        new Region(plan.windowLeft(), plan.windowTop(), out.width(), out.height()),
        mirror,
        target);
  }
}
