package dev.ramtrain.trainer.data;

import java.util.function.DoubleSupplier;

/**
 * timm's evaluation transform: for a square output, resize the shorter side to ⌊size / cropPct⌋
 * (the longer in proportion, truncated as torchvision's Resize does), for another, resize to
 * ⌊height / cropPct⌋ × ⌊width / cropPct⌋; then take the centre {@code height × width}
 * (torchvision's CenterCrop rounding). With {@code cropPct} 1 and a square image of the output's
 * size it is the image itself.
 */
public record CenterCrop(int height, int width, double cropPct) implements InputResize {
  public CenterCrop {
    if (height < 0 || width < 0) {
      throw new IllegalArgumentException("output size " + height + "x" + width + ": 0 or more");
    }
    if (!(cropPct > 0 && cropPct <= 1)) {
      throw new IllegalArgumentException("crop-pct " + cropPct + ": must be in (0, 1]");
    }
  }

  @Override
  public CropPlan plan(int imageHeight, int imageWidth, DoubleSupplier uniform) {
    int height = heightFor(imageHeight);
    int width = widthFor(imageWidth);
    int resizedHeight = (int) Math.floor(height / cropPct);
    int resizedWidth = (int) Math.floor(width / cropPct);
    if (height == width) { // Resize(int): the shorter side, the longer as Python's int(s * l / s)
      int scaleSize = resizedHeight;
      if (imageWidth < imageHeight) {
        resizedWidth = scaleSize;
        resizedHeight = (int) ((double) ((long) scaleSize * imageHeight) / imageWidth);
      } else {
        resizedHeight = scaleSize;
        resizedWidth = (int) ((double) ((long) scaleSize * imageWidth) / imageHeight);
      }
    }
    if (resizedHeight < height || resizedWidth < width) {
      throw new IllegalArgumentException(
          String.format(
              "a %dx%d image resized to %dx%d cannot be centre-cropped to %dx%d",
              imageHeight, imageWidth, resizedHeight, resizedWidth, height, width));
    }
    return new CropPlan(
        0,
        0,
        imageHeight,
        imageWidth,
        resizedHeight,
        resizedWidth,
        (int) Math.rint((resizedHeight - height) / 2.0),
        (int) Math.rint((resizedWidth - width) / 2.0));
  }
}
