package dev.ramtrain.trainer.nn;

import java.util.ArrayList;
import java.util.List;

/** Models from a short spec string ({@code ramtrain.train.model}). */
public final class ModelSpec {
  private ModelSpec() {}

  /** {@code mlp:784-1024-1024-10}: Linear layers with ReLU between them. */
  public static List<Layer> parse(String spec) {
    String[] kindAndArgs = spec.split(":", 2);
    if (kindAndArgs[0].equals("mlp") && kindAndArgs.length == 2) {
      return mlp(spec, kindAndArgs[1]);
    }
    throw new IllegalArgumentException(
        "unknown model spec '" + spec + "'; known: mlp:IN-HIDDEN-...-OUT");
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
