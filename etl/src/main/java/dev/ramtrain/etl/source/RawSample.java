package dev.ramtrain.etl.source;

import java.io.Serializable;

/**
 * One input before decoding: an encoded image file ({@code width == 0}) or raw uint8 HWC pixels
 * (idx, CIFAR). {@code key} identifies the sample stably (a relative path, or file and record
 * index); {@code split} is the source's own train/val assignment, or null to split by key hash.
 */
public record RawSample(
    String key, byte[] content, int label, int width, int height, int channels, String split)
    implements Serializable {

  public static RawSample encoded(String key, byte[] content, int label, String split) {
    return new RawSample(key, content, label, 0, 0, 0, split);
  }

  public static RawSample pixels(
      String key, byte[] hwc, int label, int width, int height, int channels, String split) {
    return new RawSample(key, hwc, label, width, height, channels, split);
  }

  public boolean isRaw() {
    return width > 0;
  }
}
