package dev.ramtrain.jobs.train;

import dev.ramtrain.etl.image.JpegRowDecoder;
import dev.ramtrain.etl.image.Region;
import dev.ramtrain.format.ImageShape;
import dev.ramtrain.trainer.data.JpegDecoder;

/**
 * The loader's JPEG decoder in a job: libjpeg-turbo through the etl module's region decoder, the
 * decoder preprocessing checked each stored JPEG against (and OpenCV's whole decode where the
 * region decoder is not built). The trainer stays free of native image code.
 */
final class LibjpegRows implements JpegDecoder {
  @Override
  public String decode(
      long jpeg,
      int length,
      ImageShape stored,
      int reduce,
      int x,
      int y,
      int width,
      int height,
      long target) {
    return JpegRowDecoder.decode(
        jpeg, length, stored, reduce, new Region(x, y, width, height), target);
  }
}
