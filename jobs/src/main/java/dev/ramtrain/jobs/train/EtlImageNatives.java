package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.image.CropResize;
import dev.ramtrain.etl.image.JpegRowDecoder;
import dev.ramtrain.etl.image.Region;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.data.CropPlan;
import dev.ramtrain.trainer.data.CropResampler;
import dev.ramtrain.trainer.data.JpegDecoder;
import dev.ramtrain.trainer.run.ImageNatives;
import java.util.function.Supplier;

/**
 * The etl module's native image code for the trainer's loaders: libjpeg-turbo through its region
 * decoder, the decoder preprocessing checked each stored JPEG against (OpenCV's whole decode where
 * the region decoder is not built), and OpenCV's resample, what stored images were resized with.
 */
public final class EtlImageNatives implements ImageNatives {
  @Override
  public JpegDecoder jpeg() {
    return (jpeg, length, stored, reduce, x, y, width, height, target) ->
        JpegRowDecoder.decode(
            jpeg, length, stored, reduce, new Region(x, y, width, height), target);
  }

  /** OpenCV's natives loaded here, before the first batch. */
  @Override
  public Supplier<CropResampler> preprocessingResize() {
    CropResize.preload();
    return () -> EtlImageNatives::resize;
  }

  private static void resize(
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
