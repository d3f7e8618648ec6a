package dev.ramtrain.format;

import java.io.Serializable;

/** Height, width and channel count of the uint8 HWC images of a shard. */
public record ImageShape(int height, int width, int channels) implements Serializable {

  /** HEIGHTxWIDTHxCHANNELS, e.g. 32x32x3; an IllegalArgumentException says what is wrong. */
  public static ImageShape parse(String text) {
    String[] p = text.toLowerCase(java.util.Locale.ROOT).split("x");
    try {
      if (p.length != 3) {
        throw new NumberFormatException();
      }
      return new ImageShape(Integer.parseInt(p[0]), Integer.parseInt(p[1]), Integer.parseInt(p[2]));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          text + ": expected HEIGHTxWIDTHxCHANNELS, e.g. 32x32x3", e);
    }
  }

  public ImageShape {
    if (height <= 0 || width <= 0) {
      throw new IllegalArgumentException(
          "image size must be positive, got " + height + "x" + width);
    }
    if (channels != 1 && channels != 3) {
      throw new IllegalArgumentException("channels must be 1 or 3, got " + channels);
    }
    if ((long) height * width * channels > Integer.MAX_VALUE / 4) {
      throw new IllegalArgumentException("image too large for a shard: " + height + "x" + width);
    }
  }

  /** Bytes of one image (uint8, HWC). */
  public int bytes() {
    return height * width * channels;
  }

  @Override
  public String toString() {
    return height + "x" + width + "x" + channels;
  }
}
