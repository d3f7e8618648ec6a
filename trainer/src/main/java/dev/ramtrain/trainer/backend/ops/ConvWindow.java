package dev.ramtrain.trainer.backend.ops;

import static dev.ramtrain.trainer.backend.ArgumentChecks.convOut;

/**
 * A kh×kw window sliding with {@code stride} over n NCHW images padded by {@code pad}: the shape
 * {@link Im2col} and {@link Col2im} share. Its constructor rejects a window that does not fit.
 */
public record ConvWindow(int n, int c, int h, int w, int kh, int kw, int stride, int pad) {
  public ConvWindow {
    convOut(h, kh, stride, pad);
    convOut(w, kw, stride, pad);
  }

  public int oh() {
    return convOut(h, kh, stride, pad);
  }

  public int ow() {
    return convOut(w, kw, stride, pad);
  }

  public long inputCount() {
    return (long) n * c * h * w;
  }

  /** Elements of the output of a convolution with {@code outChannels} filters over this window. */
  public long outputCount(int outChannels) {
    return (long) n * outChannels * oh() * ow();
  }

  /** Elements of the columns: per image, c·kh·kw rows of oh·ow. */
  public long columnCount() {
    return (long) n * oh() * ow() * c * kh * kw;
  }
}
