package dev.ramtrain.trainer.nn;

import dev.ramtrain.etl.shard.ImageShape;
import java.util.ArrayList;
import java.util.List;

/** Models from a short spec string ({@code ramtrain.train.model}). */
public final class ModelSpec {
  private ModelSpec() {}

  /** {@code mlp:784-1024-1024-10}: Linear layers with ReLU between them. */
  public static List<Layer> parse(String spec) {
    return parse(spec, null);
  }

  /**
   * Parses a spec for inputs of {@code shape} (channels, height, width; needed by {@code cnn}):
   *
   * <ul>
   *   <li>{@code mlp:IN-H1-...-OUT}: Linear layers with ReLU between them.
   *   <li>{@code cnn:c32-p-c64-p-f128-10}: {@code cN} a 3×3 convolution (padding 1) with ReLU,
   *       {@code p} 2×2 max pooling, {@code fN} a Linear layer with ReLU, the last number the
   *       classes. {@code cnn:c32-p-c64-p-f128-10} is the CNN of the PyTorch anchor.
   * </ul>
   */
  public static List<Layer> parse(String spec, ImageShape shape) {
    String[] kindAndArgs = spec.split(":", 2);
    if (kindAndArgs.length == 2 && kindAndArgs[0].equals("mlp")) {
      return mlp(spec, kindAndArgs[1]);
    }
    if (kindAndArgs.length == 2 && kindAndArgs[0].equals("cnn")) {
      if (shape == null) {
        throw new IllegalArgumentException(spec + ": a CNN needs the input image shape");
      }
      return cnn(spec, kindAndArgs[1], shape);
    }
    throw new IllegalArgumentException(
        "unknown model spec '"
            + spec
            + "'; known: mlp:IN-HIDDEN-...-OUT, cnn:c32-p-c64-p-f128-CLASSES");
  }

  private static List<Layer> cnn(String spec, String body, ImageShape shape) {
    String[] tokens = body.split("-");
    List<Layer> layers = new ArrayList<>();
    int c = shape.channels();
    int h = shape.height();
    int w = shape.width();
    int flat = -1; // features once flattened
    int convs = 0;
    int pools = 0;
    int fcs = 0;
    for (int i = 0; i < tokens.length; i++) {
      String t = tokens[i].strip();
      boolean last = i == tokens.length - 1;
      if (t.startsWith("c") && flat < 0) {
        int out = number(spec, t.substring(1));
        Conv2d conv = new Conv2d("conv" + ++convs, c, h, w, out, 3, 1, 1);
        layers.add(conv);
        layers.add(
            new Activation("conv" + convs + ".relu", Activation.Kind.RELU, conv.outputSize()));
        c = out;
        h = conv.outputHeight();
        w = conv.outputWidth();
      } else if (t.equals("p") && flat < 0) {
        MaxPool2d pool = new MaxPool2d("pool" + ++pools, c, h, w, 2, 2);
        layers.add(pool);
        h = pool.outputHeight();
        w = pool.outputWidth();
      } else if (t.startsWith("f") || last) {
        int in = flat < 0 ? c * h * w : flat;
        int out = number(spec, t.startsWith("f") ? t.substring(1) : t);
        layers.add(new Linear("fc" + ++fcs, in, out));
        if (!last) {
          layers.add(new Activation("fc" + fcs + ".relu", Activation.Kind.RELU, out));
        }
        flat = out;
      } else {
        throw new IllegalArgumentException(
            spec + ": '" + t + "' is not cN, p or fN (convolutions and pooling come before fN)");
      }
    }
    return layers;
  }

  private static int number(String spec, String text) {
    try {
      int v = Integer.parseInt(text);
      if (v < 1) {
        throw new NumberFormatException();
      }
      return v;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(spec + ": '" + text + "' is not a positive layer width");
    }
  }

  private static List<Layer> mlp(String spec, String sizes) {
    String[] parts = sizes.split("-");
    if (parts.length < 2) {
      throw new IllegalArgumentException(spec + ": an MLP needs at least input and output sizes");
    }
    int[] widths = new int[parts.length];
    for (int i = 0; i < parts.length; i++) {
      try {
        widths[i] = Integer.parseInt(parts[i].strip());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(spec + ": '" + parts[i] + "' is not a layer width");
      }
    }
    List<Layer> layers = new ArrayList<>();
    for (int i = 0; i + 1 < widths.length; i++) {
      layers.add(new Linear("fc" + (i + 1), widths[i], widths[i + 1]));
      if (i + 2 < widths.length) {
        layers.add(new Activation("relu" + (i + 1), Activation.Kind.RELU, widths[i + 1]));
      }
    }
    return layers;
  }
}
