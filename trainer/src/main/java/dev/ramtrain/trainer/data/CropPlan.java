package dev.ramtrain.trainer.data;

/**
 * Which stored pixels become a sample's input and how: the region {@code top, left, height, width}
 * of the stored image is resized (antialiased bilinear, {@link AntialiasedResize}) to {@code
 * resizedHeight × resizedWidth}, of which the window at {@code windowTop, windowLeft} of the
 * output's size is kept. A random resized crop keeps the whole resized region; an evaluation resize
 * keeps its centre.
 */
public record CropPlan(
    int top,
    int left,
    int height,
    int width,
    int resizedHeight,
    int resizedWidth,
    int windowTop,
    int windowLeft) {
  public CropPlan {
    if (top < 0 || left < 0 || height < 1 || width < 1 || resizedHeight < 1 || resizedWidth < 1) {
      throw new IllegalArgumentException(
          "crop " + height + "x" + width + " at " + top + "," + left);
    }
    if (windowTop < 0 || windowLeft < 0) {
      throw new IllegalArgumentException("window at " + windowTop + "," + windowLeft);
    }
  }
}
