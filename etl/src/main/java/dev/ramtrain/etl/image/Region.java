package dev.ramtrain.etl.image;

/**
 * A rectangle of an image in pixels: what one output shows of it. Plain Java, so drawing crops
 * allocates nothing native; OpenCV Rects are made where a view is cut.
 */
public record Region(int x, int y, int width, int height) {

  /** The smallest region holding both. */
  Region union(Region o) {
    int x0 = Math.min(x, o.x);
    int y0 = Math.min(y, o.y);
    return new Region(
        x0, y0, Math.max(x + width, o.x + o.width) - x0, Math.max(y + height, o.y + o.height) - y0);
  }

  long area() {
    return (long) width * height;
  }
}
