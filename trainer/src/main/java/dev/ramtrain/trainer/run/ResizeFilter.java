package dev.ramtrain.trainer.run;

import dev.ramtrain.trainer.data.AntialiasedResize;
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

  /** A resampler per loader batch: PREPROCESSING's from the job's native image code. */
  public Supplier<CropResampler> resamplers(ImageNatives natives) {
    return this == PILLOW ? AntialiasedResize::new : natives.preprocessingResize();
  }
}
