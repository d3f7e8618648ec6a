package dev.ramtrain.etl.source;

import java.io.Serializable;

/**
 * One input before decoding: an encoded image file ({@code width == 0}) or raw uint8 HWC pixels
 * (idx, CIFAR). {@code key} identifies the sample stably (a relative path, or file and record
 * index); {@code split} is the source's own train/val assignment, or null to split by key hash.
 *
 * <p>A file's bytes may be left unread ({@code content == null}) with its {@code location}: the
 * task that decodes it reads them (see {@link SampleBytes}), so only the reference crosses the
 * shuffle that groups samples into shards, not the compressed image.
 */
public record RawSample(
    String key,
    byte[] content,
    int label,
    int width,
    int height,
    int channels,
    String split,
    String location)
    implements Serializable {

  public static RawSample encoded(String key, byte[] content, int label, String split) {
    return new RawSample(key, content, label, 0, 0, 0, split, null);
  }

  /** An encoded file not read yet: {@code location} is its fully qualified Hadoop path. */
  public static RawSample unread(String key, String location, int label, String split) {
    return new RawSample(key, null, label, 0, 0, 0, split, location);
  }

  public static RawSample pixels(
      String key, byte[] hwc, int label, int width, int height, int channels, String split) {
    return new RawSample(key, hwc, label, width, height, channels, split, null);
  }

  public boolean isRaw() {
    return width > 0;
  }

  public boolean isRead() {
    return content != null;
  }

  public RawSample withContent(byte[] bytes) {
    return new RawSample(key, bytes, label, width, height, channels, split, location);
  }
}
