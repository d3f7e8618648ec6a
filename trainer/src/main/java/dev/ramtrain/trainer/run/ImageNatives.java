package dev.ramtrain.trainer.run;

import dev.ramtrain.trainer.data.CropResampler;
import dev.ramtrain.trainer.data.JpegDecoder;
import java.util.function.Supplier;

/**
 * The native image code a run's loaders call and the trainer does not hold: libjpeg-turbo's region
 * decoder and OpenCV's resample, the code preprocessing used (the etl module's, handed in by the
 * job, so the trainer stays free of native image libraries).
 */
public interface ImageNatives {
  /** The decoder of the JPEG rows a dataset stores. */
  JpegDecoder jpeg();

  /**
   * A resampler per loader batch, as preprocessing resized ({@link ResizeFilter#PREPROCESSING}).
   */
  Supplier<CropResampler> preprocessingResize();
}
