package dev.ramtrain.trainer.data;

import dev.ramtrain.format.ImageShape;
import java.io.Serializable;
import java.util.function.DoubleSupplier;

/**
 * How a stored image becomes a model input of {@link #height} × {@link #width} (0: the stored size
 * on that axis): a random resized crop for training ({@link RandomResizedCrop}), a resize and
 * centre crop for evaluation ({@link CenterCrop}).
 */
public sealed interface InputResize extends Serializable permits RandomResizedCrop, CenterCrop {
  int height();

  int width();

  /** The inputs' shape for images stored as {@code stored}. */
  default ImageShape outputShape(ImageShape stored) {
    return new ImageShape(
        height() == 0 ? stored.height() : height(),
        width() == 0 ? stored.width() : width(),
        stored.channels());
  }

  /** The output's height for a stored image of {@code imageHeight} rows. */
  default int heightFor(int imageHeight) {
    return height() == 0 ? imageHeight : height();
  }

  /** The output's width for a stored image of {@code imageWidth} columns. */
  default int widthFor(int imageWidth) {
    return width() == 0 ? imageWidth : width();
  }

  /**
   * The plan for a stored {@code imageHeight × imageWidth} image, drawing what it draws from {@code
   * uniform} (values in [0, 1)).
   */
  CropPlan plan(int imageHeight, int imageWidth, DoubleSupplier uniform);
}
