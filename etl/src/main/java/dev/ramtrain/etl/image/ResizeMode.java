package dev.ramtrain.etl.image;

/** How a decoded image becomes the dataset's fixed size ({@code ramtrain.etl.image.resize}). */
public enum ResizeMode {
  /**
   * Scale the shorter side to the target, then take the centre (torchvision Resize + CenterCrop).
   */
  SHORTER_SIDE_CROP,
  /** Scale each side to the target, ignoring the aspect ratio. */
  STRETCH,
  /** Scale to fit inside the target, keeping the aspect ratio, and pad with black. */
  LETTERBOX
}
