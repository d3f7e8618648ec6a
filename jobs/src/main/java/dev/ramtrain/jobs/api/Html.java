package dev.ramtrain.jobs.api;

import java.awt.image.RenderedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Base64;
import javax.imageio.ImageIO;

/** Pictures for a notebook's {@code %html} output: inline PNGs, no file to serve. */
final class Html {
  private Html() {}

  static String image(RenderedImage image, String alt) throws IOException {
    ByteArrayOutputStream png = new ByteArrayOutputStream();
    ImageIO.write(image, "png", png);
    return "<img alt=\""
        + alt.replace("&", "&amp;").replace("\"", "&quot;").replace("<", "&lt;")
        + "\" src=\"data:image/png;base64,"
        + Base64.getEncoder().encodeToString(png.toByteArray())
        + "\">";
  }
}
