package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;

/**
 * Decodes a JPEG row of an encoded shard, where it lies in the mapped shard, into a loader's
 * scratch: only the region a crop needs, scaled down in the DCT by 1/{@code reduce} when the crop
 * is that much larger than its output. The trainer has none of its own (decoding is native code the
 * trainer does not carry); the jobs pass libjpeg-turbo's, the decoder preprocessing's pixels came
 * from. Stateless: one serves every worker.
 */
public interface JpegDecoder {
  /**
   * Writes the {@code width × height} region at {@code x, y} of the image scaled by 1/{@code
   * reduce} (libjpeg's scaled size: the stored size divided, rounded up) of the {@code length}-byte
   * JPEG at {@code jpeg} to {@code target}, as rows of {@code width × channels} bytes. Returns
   * null, or why the bytes are not a JPEG decoding to {@code stored} (damaged, another size): the
   * loader names the sample and its shard.
   */
  String decode(
      long jpeg,
      int length,
      ImageShape stored,
      int reduce,
      int x,
      int y,
      int width,
      int height,
      long target);

  /** The largest DCT scale-down it decodes at: 8 for libjpeg's 1/2, 1/4, 1/8; 1 for none. */
  default int largestReduce() {
    return 8;
  }
}
