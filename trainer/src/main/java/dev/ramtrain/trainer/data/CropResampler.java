package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;

/**
 * Writes the window of a {@link CropPlan} of one stored image into a batch slot, mirrored or not:
 * the filter a loader resizes with. The trainer's own is {@link AntialiasedResize} (Pillow's
 * bilinear to the pixel, plain Java); where preprocessing ran, the job passes preprocessing's
 * (OpenCV's, faster), so that crops drawn at load time are filtered as stored images were. One per
 * loader worker at a time: implementations may keep scratch.
 */
public interface CropResampler {
  /**
   * {@code image}: the address of a {@code stored} image (rows of width × channels bytes); {@code
   * target}: where the {@code out}-shaped window goes.
   */
  void resample(
      long image, ImageShape stored, CropPlan plan, ImageShape out, boolean mirror, long target);
}
